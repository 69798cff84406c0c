"""Reading the cluster: the Kubernetes API client, the watch-fed cache, state and policy files."""
