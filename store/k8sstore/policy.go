package k8sstore

import _ "embed"

//go:embed policy.yaml
var admissionPolicy string

// AdmissionPolicyName is the name of the ValidatingAdmissionPolicy that
// [AdmissionPolicy] returns, and of its binding.
const AdmissionPolicyName = "tenure-lease-token"

// AdmissionPolicy returns, as YAML for kubectl apply, a
// ValidatingAdmissionPolicy and its binding (admissionregistration.k8s.io/v1,
// Kubernetes 1.30 or later; both cluster-wide) that keep what [Role] cannot:
// an update of a Lease object carrying a tenure.dev/token annotation is
// refused, whoever sends it, unless the token stays or goes up by exactly
// one, and unless a change of holder, or a released tenure held again,
// comes with the next token. Those are the store's own writes; a worker
// that rewrites the annotation to make a later tenure reuse a token is
// refused. `tenure migrate --print --grant` prints it after the Role. The
// package doc says what it leaves open.
func AdmissionPolicy() string { return admissionPolicy }
