//go:build tools

// Package tools pins kwok (the fake kubelet) for tools/controlplane/build.sh.
// It is a module of its own because kwok is built against older k8s.io/* libraries
// than the control plane in ../kube. It is never compiled.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
