"""poolguard's pure core: no I/O, no Flask, no Kubernetes client.

Everything here works on plain dicts shaped like Kubernetes objects and returns
plain data, so the admission server, the reconciler and `plan` share one truth.
One package per controller, as Kubernetes keeps pkg/controller/<name>/, each with the
predictor its kind's record in kinds/registry.py names, and the shared pieces grouped by
concept, in the order they build on each other:

- errors.py            the core's input error
- objects/             reading objects, label selectors, ownership, a pod's facts
- cost/                the deletion-cost annotation and what a pod should carry
- policy/              the node-pool policy and its text form
- model/               what predictions are made of: ranked pods, tie groups, the prediction
- view/                the view of the cluster a prediction reads
- replicaset/          the ReplicaSet controller: the ranking and its syncs
- deployment/          the Deployment controller: its split and the syncs after it
- statefulset/         the StatefulSet controller: condemned ordinals
- leaderworkerset/     the LeaderWorkerSet controller: whole groups
- argorollouts/        the Argo Rollouts controller: a Rollout's ReplicaSets
- cloneset/            the OpenKruise CloneSet controller: its scale-in
- kinds/               the workload kinds: one record each, the registry of them (the only
                       package that imports the kind packages)
- consolidation/       pool bands and node ranks: costs that free whole GPU nodes
- scale/               the victims of a scale per kind, judged against the policy
"""
