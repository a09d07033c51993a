package chaos

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/tenure-dev/tenure/store"

	"github.com/hashicorp/consul/api"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/store/consulstore"
	"github.com/tenure-dev/tenure/store/etcdstore"
)

// The etcd and consul cells keep both chains in the store's own server,
// outside its lease prefix: key <data><res>/n is the head, <data><res>/w/<n>
// the link "token|wid". The fenced chain is written with the store's
// StrictTxn, the strict check on the lease's own keys, which advances the
// renewal chain, so clones are in play.

// dataPrefix is where a cell keeps its chains: beside, not under, its lease
// prefix.
func dataPrefix(id string) string { return "chaos-data/" + id + "/" }

// link is one link of a chain as its key and value.
func linkKV(prefix, res string, n int64, tok store.Token, wid string) (head, key, value string) {
	return prefix + res + "/n", prefix + res + "/w/" + strconv.FormatInt(n, 10), tok.String() + "|" + wid
}

// parseLink reads one link back.
func parseLink(prefix, res, key string, value []byte) (Row, error) {
	n, err := strconv.ParseInt(strings.TrimPrefix(key, prefix+res+"/w/"), 10, 64)
	if err != nil {
		return Row{}, fmt.Errorf("chaos: %s: bad key %q", res, key)
	}
	tokStr, wid, ok := strings.Cut(string(value), "|")
	tok, err := strconv.ParseInt(tokStr, 10, 64)
	if !ok || err != nil {
		return Row{}, fmt.Errorf("chaos: %s: bad link %q", res, value)
	}
	w, _ := splitWID(wid)
	return Row{N: n, Token: tok, Writer: w, WID: wid}, nil
}

// etcdResource keeps the chains in etcd. st is nil for the harness's
// reader, which writes nothing.
type etcdResource struct {
	cli    *clientv3.Client
	st     *etcdstore.Store
	prefix string
}

func (r *etcdResource) begin(context.Context, *tenure.Lease, store.Token) error { return nil }

func (r *etcdResource) head(ctx context.Context, res string) (int64, error) {
	resp, err := r.cli.Get(ctx, r.prefix+res+"/n")
	if err != nil || len(resp.Kvs) == 0 {
		return 0, err
	}
	return strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64)
}

func (r *etcdResource) ops(res string, n int64, tok store.Token, wid string) []clientv3.Op {
	head, key, value := linkKV(r.prefix, res, n, tok, wid)
	return []clientv3.Op{clientv3.OpPut(head, strconv.FormatInt(n, 10)), clientv3.OpPut(key, value)}
}

// fenced reads the head while the chain write is begun, so that renewals
// wait for the write, and writes the next link in a strict transaction.
func (r *etcdResource) fenced(ctx context.Context, l *tenure.Lease, tok store.Token, wid string) error {
	w, err := l.BeginChainWrite()
	if err != nil {
		return err
	}
	n, err := r.head(ctx, resFenced)
	if err != nil {
		w.Abort()
		return err
	}
	_, err = r.st.StrictTxn(ctx, w, r.ops(resFenced, n+1, tok, wid)...)
	return err
}

func (r *etcdResource) twin(ctx context.Context, tok store.Token, wid string) error {
	n, err := r.head(ctx, resTwin)
	if err != nil {
		return err
	}
	_, err = r.cli.Txn(ctx).Then(r.ops(resTwin, n+1, tok, wid)...).Commit()
	return err
}

func (r *etcdResource) rows(ctx context.Context, res string) ([]Row, error) {
	resp, err := r.cli.Get(ctx, r.prefix+res+"/w/", clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("chaos: read %s: %w", res, err)
	}
	out := make([]Row, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		row, err := parseLink(r.prefix, res, string(kv.Key), kv.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, row)
	}
	return out, nil
}

func (r *etcdResource) close() {}

// consulResource keeps the chains in Consul's KV store, read with
// consistent reads. st is nil for the harness's reader.
type consulResource struct {
	cli    *api.Client
	st     *consulstore.Store
	prefix string
}

func (r *consulResource) begin(context.Context, *tenure.Lease, store.Token) error { return nil }

func (r *consulResource) head(ctx context.Context, res string) (int64, error) {
	p, _, err := r.cli.KV().Get(r.prefix+res+"/n", (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	if err != nil || p == nil {
		return 0, err
	}
	return strconv.ParseInt(string(p.Value), 10, 64)
}

func (r *consulResource) ops(res string, n int64, tok store.Token, wid string) api.TxnOps {
	head, key, value := linkKV(r.prefix, res, n, tok, wid)
	return api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVSet, Key: head, Value: []byte(strconv.FormatInt(n, 10))}},
		{KV: &api.KVTxnOp{Verb: api.KVSet, Key: key, Value: []byte(value)}},
	}
}

// fenced reads the head while the chain write is begun, so that renewals
// wait for the write, and writes the next link in a strict transaction.
func (r *consulResource) fenced(ctx context.Context, l *tenure.Lease, tok store.Token, wid string) error {
	w, err := l.BeginChainWrite()
	if err != nil {
		return err
	}
	n, err := r.head(ctx, resFenced)
	if err != nil {
		w.Abort()
		return err
	}
	_, err = r.st.StrictTxn(ctx, w, r.ops(resFenced, n+1, tok, wid))
	return err
}

func (r *consulResource) twin(ctx context.Context, tok store.Token, wid string) error {
	n, err := r.head(ctx, resTwin)
	if err != nil {
		return err
	}
	ok, resp, _, err := r.cli.Txn().Txn(r.ops(resTwin, n+1, tok, wid), (&api.QueryOptions{}).WithContext(ctx))
	if err == nil && !ok {
		err = fmt.Errorf("chaos: twin write rolled back: %v", resp.Errors)
	}
	return err
}

func (r *consulResource) rows(ctx context.Context, res string) ([]Row, error) {
	pairs, _, err := r.cli.KV().List(r.prefix+res+"/w/", (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("chaos: read %s: %w", res, err)
	}
	out := make([]Row, 0, len(pairs))
	for _, p := range pairs {
		row, err := parseLink(r.prefix, res, p.Key, p.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, row)
	}
	return out, nil
}

func (r *consulResource) close() {}
