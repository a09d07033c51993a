package pgstore

import "context"

// SetListenHook makes s call hook with the backend pid of every listening
// connection once its LISTEN succeeded.
func SetListenHook(s *Store, hook func(pid uint32)) {
	s.hookMu.Lock()
	defer s.hookMu.Unlock()
	s.listenHook = hook
}

// MigrateTo applies the store's migrations up to version only, as an older
// library would have.
func MigrateTo(ctx context.Context, s *Store, version int) error {
	set, err := migrations(s.obj)
	if err != nil {
		return err
	}
	set.Migrations = set.Migrations[:version]
	return set.Run(ctx, s.pool)
}

// Versions lists the versions of every embedded migration, in order.
func Versions() []int {
	set, err := migrations(Objects{})
	if err != nil {
		panic(err)
	}
	vs := make([]int, len(set.Migrations))
	for i, m := range set.Migrations {
		vs[i] = m.Version
	}
	return vs
}
