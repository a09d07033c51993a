package etcdstore

// WaitForSpares waits for the spare etcd leases s is granting.
func WaitForSpares(s *Store) { s.spares.wg.Wait() }
