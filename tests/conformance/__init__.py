"""Conformance suite: API semantics the embedded server shares with kube-apiserver."""
