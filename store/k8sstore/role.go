package k8sstore

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultRoleName is the name [Role] gives its Role.
const DefaultRoleName = "tenure"

// Role returns the least a worker's credentials need in namespace: get,
// list, watch, create, update and patch on Lease objects. Not delete: a
// worker never deletes a lease's object (its token would then restart
// from the namespace's resourceVersion: still greater, but an operator's
// act, not a worker's). Bind it to the worker's service account with a
// RoleBinding; `tenure migrate --print --grant` prints both as YAML.
func Role(namespace string) *rbacv1.Role {
	return &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: metav1.ObjectMeta{Name: DefaultRoleName, Namespace: namespace},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"coordination.k8s.io"},
			Resources: []string{"leases"},
			Verbs:     []string{"get", "list", "watch", "create", "update", "patch"},
		}},
	}
}
