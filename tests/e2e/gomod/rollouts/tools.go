//go:build tools

// Wrapper module: builds the Argo Rollouts controller for poolguard's e2e tier (never vendored).
package tools

import _ "github.com/argoproj/argo-rollouts/cmd/rollouts-controller"
