package pgstore

// SetListenHook makes s call hook with the backend pid of every listening
// connection once its LISTEN succeeded.
func SetListenHook(s *Store, hook func(pid uint32)) {
	s.hookMu.Lock()
	defer s.hookMu.Unlock()
	s.listenHook = hook
}
