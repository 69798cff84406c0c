"""Objects shaped like a real cluster's, at their real size, for memory and cache figures.

The factories build the few fields poolguard reads; a real API server sends much more
(environment lists, probes, volumes, managedFields), and what a cache holds, parses and
frees grows with that.
"""

from __future__ import annotations

from tests.support import factories as f


def realistic_pod(index: int) -> dict:
    """A Deployment pod as a real API server returns it (~8.5 KB JSON)."""
    rs = f.replicaset("serve-7d4b9c", owner=f.deployment("serve"), pod_hash="7d4b9c")
    name = f"serve-7d4b9c-{index:06d}"
    pod = f.pod(name, node_name=f"gpu-node-{index % 1000:04d}", owner=rs,
                cost="1000" if index % 3 else "-100",
                labels={"app.kubernetes.io/name": "serve", "app.kubernetes.io/version": "1.8.2",
                        "team": "inference", "tier": "online"},
                annotations={"kubectl.kubernetes.io/restartedAt": "2026-11-20T08:00:00Z",
                             "prometheus.io/scrape": "true", "prometheus.io/port": "9090",
                             "poolguard.dev/managed-deletion-cost": "1000",
                             "poolguard.dev/pool": "inference"})
    env = [{"name": f"SETTING_{i}", "value": f"value-{i}-" + "x" * 24} for i in range(24)]
    pod["spec"].update({
        "containers": [{
            "name": "main", "image": "registry.example.com/serve/model-server:1.8.2",
            "args": ["--model", "/models/llm", "--port", "8080", "--max-batch", "64"],
            "env": env, "ports": [{"containerPort": 8080, "protocol": "TCP"},
                                  {"containerPort": 9090, "name": "metrics", "protocol": "TCP"}],
            "resources": {"limits": {"nvidia.com/gpu": "1", "memory": "64Gi", "cpu": "8"},
                          "requests": {"nvidia.com/gpu": "1", "memory": "64Gi", "cpu": "8"}},
            "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080},
                               "periodSeconds": 5, "failureThreshold": 3},
            "volumeMounts": [{"name": "models", "mountPath": "/models", "readOnly": True},
                             {"name": "kube-api-access-abcde",
                              "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                              "readOnly": True}],
            "terminationMessagePath": "/dev/termination-log", "imagePullPolicy": "IfNotPresent"}],
        "volumes": [{"name": "models", "persistentVolumeClaim": {"claimName": "models"}},
                    {"name": "kube-api-access-abcde", "projected": {"sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {"configMap": {"name": "kube-root-ca.crt",
                                       "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                        {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                         "effect": "NoExecute", "tolerationSeconds": 300}],
        "restartPolicy": "Always", "dnsPolicy": "ClusterFirst", "schedulerName": "default",
        "serviceAccountName": "serve", "priority": 1000000, "enableServiceLinks": True})
    pod["status"].update({
        "hostIP": f"10.0.{index % 250}.{index % 200}", "podIP": f"10.244.{index % 250}.7",
        "podIPs": [{"ip": f"10.244.{index % 250}.7"}], "qosClass": "Guaranteed",
        "startTime": "2026-11-20T08:00:05Z"})
    pod["status"]["conditions"] += [
        {"type": t, "status": "True", "lastProbeTime": None,
         "lastTransitionTime": "2026-11-20T08:00:30Z"}
        for t in ("PodReadyToStartContainers", "ContainersReady", "PodScheduled")]
    pod["status"]["containerStatuses"][0].update({
        "image": "registry.example.com/serve/model-server:1.8.2",
        "imageID": "registry.example.com/serve/model-server@sha256:" + "ab" * 32,
        "containerID": "containerd://" + "cd" * 32, "started": True,
        "state": {"running": {"startedAt": "2026-11-20T08:00:20Z"}}, "lastState": {}})
    pod["metadata"].update({"resourceVersion": str(100000 + index),
                            "generateName": "serve-7d4b9c-"})
    pod["metadata"]["managedFields"] = [
        {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
         "time": "2026-11-20T08:00:00Z", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {
             f"f:{k}": {} for k in pod["metadata"]["labels"]}, "f:ownerReferences": {}},
             "f:spec": {"f:containers": {'k:{"name":"main"}': {
                 **{f"f:{k}": {} for k in ("args", "image", "ports", "resources",
                                           "readinessProbe", "volumeMounts")},
                 "f:env": {f'k:{{"name":"{e["name"]}"}}': {".": {}, "f:name": {}, "f:value": {}}
                           for e in env}}},
                 "f:tolerations": {}, "f:volumes": {}}}},
        {"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
         "time": "2026-11-20T08:00:30Z", "fieldsType": "FieldsV1", "subresource": "status",
         "fieldsV1": {"f:status": {"f:conditions": {
             f'k:{{"type":"{t}"}}': {"f:lastProbeTime": {}, "f:lastTransitionTime": {},
                                     "f:status": {}, "f:type": {}}
             for t in ("Ready", "ContainersReady", "Initialized", "PodScheduled",
                       "PodReadyToStartContainers")},
             "f:containerStatuses": {}, "f:hostIP": {}, "f:podIP": {}, "f:podIPs": {},
             "f:startTime": {}}}}]
    return pod
