//go:build tools

// Wrapper module: builds the LeaderWorkerSet controller for poolguard's e2e tier (never vendored).
package tools

import _ "sigs.k8s.io/lws/cmd"
