//go:build tools

// Package tools pins the promtool command the alert-rule tests build.
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
