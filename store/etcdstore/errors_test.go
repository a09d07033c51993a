package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		err         error
		unavailable bool
		contains    string
	}{
		"Deadline":         {err: context.DeadlineExceeded, unavailable: true},
		"Canceled":         {err: fmt.Errorf("wrapped: %w", context.Canceled), unavailable: true},
		"TransportDown":    {err: status.Error(codes.Unavailable, "connection refused"), unavailable: true},
		"NoLeader":         {err: rpctypes.ErrNoLeader, unavailable: true},
		"NoLeaderOnWire":   {err: rpctypes.ErrGRPCNoLeader, unavailable: true},
		"NotLeader":        {err: rpctypes.ErrNotLeader, unavailable: true},
		"LeaderChanged":    {err: rpctypes.ErrLeaderChanged, unavailable: true},
		"RequestTimeout":   {err: rpctypes.ErrTimeout, unavailable: true},
		"TooManyRequests":  {err: rpctypes.ErrTooManyRequests, unavailable: true},
		"NoSpace":          {err: rpctypes.ErrNoSpace, unavailable: true},
		"TooManyOps":       {err: rpctypes.ErrTooManyOps, contains: "Config.MaxTxnOps"},
		"TooLarge":         {err: rpctypes.ErrRequestTooLarge, contains: "--max-request-bytes"},
		"PermissionDenied": {err: rpctypes.ErrPermissionDenied, contains: "permission denied"},
		"Plain":            {err: errors.New("something else"), contains: "something else"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := classify("op", tc.err)
			require.ErrorIs(t, err, tc.err, "the cause stays wrapped")
			require.Equal(t, tc.unavailable, errors.Is(err, store.ErrUnavailable))
			require.ErrorContains(t, err, "etcdstore: op: ")
			require.ErrorContains(t, err, tc.contains)
		})
	}
	require.NoError(t, classify("op", nil))
}
