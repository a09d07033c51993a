package store

import "fmt"

// ChainWrite is the view of one chain write that a strict fence needs:
// the tenure it is made under, the renewal seq it presents, and where its
// outcome goes. A strict fence (pgfence's and mysqlfence's strict checks,
// etcdstore's and consulstore's StrictTxn) lets the write through only
// while the store's lease has exactly this name, token, holder and seq,
// and advances the seq, so of two byte-identical clones of one holder
// only one can ever write (promise P6). A *tenure.ChainWrite, from
// tenure's Lease.BeginChainWrite, is one.
type ChainWrite interface {
	// Name is the lease name.
	Name() string
	// Holder is the identity the tenure was granted to.
	Holder() Holder
	// Token is the tenure's token, 0 once it is no longer trusted.
	Token() Token
	// Seq is the renewal seq the write presents.
	Seq() int64
	// Commit reports that the write applied and left the chain at seq.
	Commit(seq int64)
	// Abort reports that the write did not apply, or that nobody knows.
	Abort()
}

// ValidateChainWrite checks what every strict fence checks before it sends
// anything: w is not nil, its lease name passes [ValidateName], its token
// is positive (0 means the tenure is no longer trusted), its holder passes
// [Holder.Validate] and its seq is positive. The error matches
// [ErrInvalid] and says what to do; callers prefix it with their package
// and operation.
func ValidateChainWrite(w ChainWrite) error {
	if w == nil {
		return fmt.Errorf("%w: the chain write is nil; pass the one tenure's Lease.BeginChainWrite returned", ErrInvalid)
	}
	name, tok, seq := w.Name(), w.Token(), w.Seq()
	if err := ValidateName(name); err != nil {
		return err
	}
	switch {
	case tok == 0:
		return fmt.Errorf("%w: token is 0 for lease %q: the tenure is no longer trusted; do not write, acquire the lease again", ErrInvalid, name)
	case tok < 0:
		return fmt.Errorf("%w: token %d for lease %q is negative; pass the chain write that tenure's Lease.BeginChainWrite returned", ErrInvalid, tok, name)
	}
	if err := w.Holder().Validate(); err != nil {
		return fmt.Errorf("lease %q: %w", name, err)
	}
	if seq <= 0 {
		return fmt.Errorf("%w: seq %d for lease %q must be positive; pass the chain write that tenure's Lease.BeginChainWrite returned", ErrInvalid, seq, name)
	}
	return nil
}
