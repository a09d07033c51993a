package k8sstore

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"github.com/tenure-dev/tenure/store"
)

// leaseClient is [Leases] over one namespace, made by [NewLeases].
type leaseClient struct {
	rest      rest.Interface
	params    runtime.ParameterCodec
	namespace string
}

var _ Leases = (*leaseClient)(nil)

// NewLeases returns the Lease objects of namespace as the credentials of
// cfg reach them (rest.InClusterConfig in a pod, or
// clientcmd's ClientConfig from a kubeconfig). It is what
// clientset.CoordinationV1().Leases(namespace) is, without the typed
// clientset and its scheme of every API group, so a program that needs
// only this store compiles and links far less. It makes no request.
// cfg is copied; its QPS and Burst apply (see the package doc on rate
// limits).
func NewLeases(cfg *rest.Config, namespace string) (Leases, error) {
	if cfg == nil {
		return nil, fmt.Errorf("k8sstore: %w: the REST config is nil; pass rest.InClusterConfig() or a kubeconfig's ClientConfig()", store.ErrInvalid)
	}
	if namespace == "" {
		return nil, fmt.Errorf("k8sstore: %w: the namespace is empty; name the namespace whose Lease objects keep the leases", store.ErrInvalid)
	}
	// The scheme knows coordination.k8s.io/v1 Lease objects and the meta/v1
	// types that requests and answers about them carry (options, Status,
	// watch events), and nothing else: the typed clientset's scheme
	// (k8s.io/client-go/kubernetes/scheme) registers every API group, which
	// is most of what a program that links it compiles.
	scheme := runtime.NewScheme()
	if err := coordinationv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("k8sstore: register coordination.k8s.io/v1 in a scheme: %w", err)
	}
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	c := rest.CopyConfig(cfg)
	gv := coordinationv1.SchemeGroupVersion
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("k8sstore: %w: REST client for coordination.k8s.io/v1: %w", store.ErrInvalid, err)
	}
	return &leaseClient{rest: rc, params: runtime.NewParameterCodec(scheme), namespace: namespace}, nil
}

const leasesResource = "leases"

func (c *leaseClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := c.rest.Get().Namespace(c.namespace).Resource(leasesResource).Name(name).
		VersionedParams(&opts, c.params).Do(ctx).Into(out)
	return out, err
}

func (c *leaseClient) Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := c.rest.Post().Namespace(c.namespace).Resource(leasesResource).
		VersionedParams(&opts, c.params).Body(lease).Do(ctx).Into(out)
	return out, err
}

func (c *leaseClient) Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := c.rest.Put().Namespace(c.namespace).Resource(leasesResource).Name(lease.Name).
		VersionedParams(&opts, c.params).Body(lease).Do(ctx).Into(out)
	return out, err
}

func (c *leaseClient) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := c.rest.Patch(pt).Namespace(c.namespace).Resource(leasesResource).Name(name).SubResource(subresources...).
		VersionedParams(&opts, c.params).Body(data).Do(ctx).Into(out)
	return out, err
}

func (c *leaseClient) List(ctx context.Context, opts metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	out := &coordinationv1.LeaseList{}
	err := c.rest.Get().Namespace(c.namespace).Resource(leasesResource).
		VersionedParams(&opts, c.params).Do(ctx).Into(out)
	return out, err
}

func (c *leaseClient) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.rest.Get().Namespace(c.namespace).Resource(leasesResource).
		VersionedParams(&opts, c.params).Watch(ctx)
}
