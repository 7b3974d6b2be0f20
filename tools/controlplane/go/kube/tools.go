//go:build tools

// Package tools pins the programs that tools/controlplane/build.sh builds, so that
// `go mod tidy` keeps them (and only them) in go.mod / go.sum. It is never compiled.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
