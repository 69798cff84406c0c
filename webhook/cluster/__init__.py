"""Reading the cluster: the Kubernetes API client, the watch-fed cache, state and policy files,
and whether the container's memory limit holds the cache."""
