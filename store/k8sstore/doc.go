// Package k8sstore keeps tenure leases in Kubernetes coordination.k8s.io/v1
// Lease objects: a [store.Store] (docs/STORES.md lists the optional
// interfaces of package store it implements) over one namespace's Leases
// (k8s.io/client-go), with what client-go's leader election lacks: a
// fencing token, and an expiry no holder's clock can move. It is tested
// against kube-apiserver 1.37 over etcd.
//
//	cfg, err := rest.InClusterConfig() // or clientcmd, from a kubeconfig
//	leases, err := k8sstore.NewLeases(cfg, "jobs")
//	st, err := k8sstore.New(leases, k8sstore.Config{})
//	client, err := tenure.New(st, tenure.Config{TTL: 30 * time.Second})
//
// [NewLeases] talks to the API server through client-go's rest package
// with a scheme that knows Lease objects only. The typed clientset's
// Leases (clientset.CoordinationV1().Leases(namespace)) works as well,
// but its scheme registers every API group: a program that links it
// compiles about 150 packages more.
//
// # Objects
//
// A lease is one Lease object, named by [ObjectName] (the prefix, a
// readable part of the lease name and a hash of it: lease names are any
// text, object names are DNS subdomains) and labelled with
// [LabelPrefix]=[Config.Prefix]. Its tenure.dev/ annotations carry the
// exact lease name, the state (held or released), the holder's label and
// instance, the token, the renewal sequence, the TTL in milliseconds, the
// holder's payload and, for people, when the tenure began by the
// acquirer's clock. The spec is kept for kubectl and other readers
// (holderIdentity "label/instance", leaseDurationSeconds, acquireTime,
// renewTime) and decides nothing.
//
// Every write is conditioned on the resourceVersion the call read (an
// update of the object read, or a merge patch that carries
// metadata.resourceVersion), so it is a compare-and-set checked by the
// API server against etcd: Acquire takes over only the version it judged
// free; Renew advances seq only on the version whose holder, token and
// seq it checked (promise P6: of two clones, one renews and the other
// finds seq moved on); Release marks released only the tenure it checked.
//
// Round trips: Acquire 2 (read, write), 3 when the object does not exist
// yet; Renew 1 per lease when the store saw the tenure last (its own
// acquisition or renewal), 2 otherwise, the leases of a batch up to 32 at
// once (Kubernetes has no transaction over several objects); Release 2;
// Get 1; List 1 per 500 objects. client-go's default rate limit (5
// requests a second, bursts of 10) is far below what renewing many
// leases needs: raise rest.Config.QPS and Burst to at least three times
// the number of leases divided by the TTL in seconds.
//
// # Clock
//
// The API server has no expiry: a Lease object lives until it is deleted,
// and its renewTime is written from the holder's wall clock, so a holder
// whose clock is wrong, or a follower whose clock is, would end or stretch
// a tenure (client-go's leader election judges by the follower's clock
// and the holder's renewTime). This store judges by what it has seen
// instead: a tenure expires when the store has seen the very same
// version (UID and resourceVersion) of its object for the tenure's TTL,
// timed on the store's own monotonic clock from the moment it first saw
// that version (a read, a write or a watch event). No wall clock decides
// anything, and spec times are not read.
//
// Why that is safe: the holder's renewal is written at or after the
// moment the holder sent it, and a follower sees it no earlier than it was
// written, so the follower's TTL ends no earlier than the holder's send
// time plus the TTL; the holder stands down before that, at its send time
// plus the TTL less its safety margin (promise P3). A follower that
// pauses, or whose clock jumps, can only judge a version it saw as
// expired; its takeover is an update conditioned on that version, which
// fails when the holder renewed meanwhile. The k8s chaos cell
// (cmd/tenure-chaos, in CI) shows it with real processes: holders paused
// past their TTL, killed and cut off, the API server restarted, and no
// write of a superseded holder accepted after its successor's. What the
// store has seen lives
// in the process: a follower that starts, or a store made anew, gives a
// tenure it has not seen before a whole TTL.
//
// Consequences, against stores with a server clock (promise P1 says the
// store owns time; here the API server owns the order of versions and
// each follower owns the time since it saw one):
//
//   - The time a held lease has left, as [Store.Get], a [*store.HeldError]
//     or a refused renewal report it, is the TTL less how long this store
//     has seen its current version: the whole TTL at a first sighting. A
//     follower told so waits at most one TTL more than the holder's tenure
//     had left.
//   - Failover after a holder's crash takes a TTL after the follower saw
//     the holder's last renewal: about the TTL plus the watch's delivery
//     delay while the follower listens ([Store.Listen] counts what it sees
//     as seen), up to two TTLs for a follower that looks only when told.
//   - Grants carry no store time ([store.Grant.At] is zero): there is no
//     server clock to compare.
//   - Monotonic clocks on Linux do not count a machine's suspension, so a
//     follower on a suspended VM judges late, never early.
//
// # Tokens
//
// The token is a counter in the object's tenure.dev/token annotation: a
// takeover writes the last token plus one, in the same conditioned update
// that changes the holder, and a release keeps it (promise P2). When the
// object does not exist (never did, or was deleted) Acquire reads the
// namespace's current resourceVersion first (a consistent list) and
// starts the token one above it. Every token is then at most the
// resourceVersion of the write that handed it out (induction: a takeover
// adds one, and each write raises the resourceVersion by at least one),
// and etcd's revisions only grow, so a lease whose object was deleted
// starts above every token it had. This needs resourceVersions that are
// etcd revisions, which is what kube-apiserver over etcd has; the store
// refuses to create an object when the server's resourceVersion is not a
// number.
//
// Tokens start again from the new cluster's revision when the leases move
// to another cluster (restored from a backup, say): a backup's revisions
// are lower. Never point fences that hold tokens of one cluster at
// another's leases.
//
// # Notifications
//
// [Store.Listen] watches the objects bearing the store's prefix label,
// from the namespace's resourceVersion, and reports each release
// ([store.NoticeReleased]), each new tenure ([store.NoticeAcquired], with
// its TTL) and each deletion of an object ([store.NoticeChanged]);
// renewals are not announced, and an expiry is nothing the API server
// sees, so none is announced: followers come back at the expiry they were
// told. When a watch ends (the API server ends watches after a while, or
// the connection broke) it lists and watches again and reports the empty
// name. The store keeps no line of followers: after a release every
// follower of the lease may try, and one update wins.
//
// # Failure modes
//
//   - Transport failures, timeouts and the API server's "try again"
//     answers (429, 500, 503, 504) match [store.ErrUnavailable]: the call
//     may have been applied, and the client treats its outcome as unknown
//     (promise P3). A refusal of the credentials (401, 403) names the
//     permissions the store needs.
//   - A write that loses its compare-and-set three times in a row (other
//     writers of the same object) fails with [store.ErrUnavailable].
//   - A Renew batch with an error in any entry is reported as the error;
//     the entries renewed meanwhile moved their seq on, so the holder,
//     which stood down, acquires again with a new token.
//   - kube-apiserver in a highly available control plane serves every
//     write through etcd's leader; a stale read (there are none: gets and
//     lists without a resourceVersion are quorum reads) could only make a
//     compare-and-set fail.
//   - An object of the prefix that this store did not write makes calls on
//     its lease fail with an error naming the object and its
//     resourceVersion; List skips it.
//   - An operator who deletes a lease's object while it is held
//     (kubectl delete lease) ends the tenure. [Store.Listen] announces the
//     deletion; the holder's client, hearing it, asks the store, finds no
//     object and stands down at once, not at its next renewal, and the
//     followers try at once: the next acquisition creates the object
//     anew, with a greater token (see Tokens). As after any forced
//     release, the next holder may begin a round trip or two before the
//     old one has stood down; fences keep them apart. A holder whose
//     watch is down learns it at its next renewal.
//   - Bad input fails with [store.ErrInvalid] and changes nothing; after
//     [Store.Close] every call fails with [store.ErrClosed].
//
// # Permissions
//
// A worker needs get, list, watch, create, update and patch on
// leases.coordination.k8s.io in the namespace, and nothing else: [Role]
// returns that Role, and `tenure migrate --print --grant` prints it with a
// RoleBinding. The namespace must exist; the store creates nothing else.
//
// That is more than the lease protocol. RBAC grants update and patch on
// whole objects, so a worker's credentials can rewrite any annotation of
// any Lease object in the namespace, the token included: lowering it, or
// keeping it under a new holder, would hand a later tenure a token a
// resource has already accepted (promise P2), and raising it past the
// namespace's resourceVersion would undo the bound that keeps tokens
// growing across a deletion (see Tokens). The Role alone does not stop
// that. [AdmissionPolicy] does: a ValidatingAdmissionPolicy and its
// binding (store/k8sstore/policy.yaml; Kubernetes 1.30 or later; a
// cluster administrator applies it, and `tenure migrate --print --grant`
// prints it after the Role) under which the API server refuses, whoever
// asks, an update of a Lease object that carries a tenure.dev/token
// annotation unless the token stays or goes up by exactly one, and
// unless a new holder, or a released lease held again, comes with the
// next token: the store's own writes pass, a rewrite of the counter does
// not. TestAdmissionPolicyKeepsTheToken applies the file to the tests'
// kube-apiserver and tries each rewrite as the worker and as an
// administrator.
//
// What a worker can still do with the policy in force, because the
// store's own writes do it: take over a lease another holds before it
// expires (with the next token, so fences refuse the old holder from the
// new holder's first write on, as after any takeover); release another's
// tenure, renew it, change its TTL or payload; and create the object of a
// lease that has none, with any token, since a policy cannot read the
// namespace's resourceVersion that a new object's token must be above. So
// a worker could start a lease whose object an operator deleted below the
// tokens it had: where workers are not trusted that far, end tenures with
// `tenure release --force`, which keeps the counter, rather than by
// deleting objects. Give workers that must not touch each other's leases
// namespaces of their own.
package k8sstore
