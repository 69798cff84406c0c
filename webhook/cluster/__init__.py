"""Reading the cluster: the Kubernetes API client, LIST requests, the reflectors and the
watch-fed cache they fill, state and policy files, and whether the container's memory limit
holds the cache."""
