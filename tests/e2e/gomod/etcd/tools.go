//go:build tools

// Package tools pins etcd, whose main package is the server module's root.
package tools

import _ "go.etcd.io/etcd/server/v3"
