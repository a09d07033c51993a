package storekit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/storekit"
	"github.com/tenure-dev/tenure/store"
)

func TestDecodeNotice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, payload string
		want          store.Notice
	}{
		{"Acquired", `{"n":"billing","k":"a","hl":"w","hi":"i1","ttl":3000000}`,
			store.Notice{Name: "billing", Kind: store.NoticeAcquired, Holder: store.Holder{Label: "w", Instance: "i1"}, Remaining: 3 * time.Second}},
		{"ReleasedKeptForNext", `{"n":"billing","k":"r","nl":"w","ni":"i2"}`,
			store.Notice{Name: "billing", Kind: store.NoticeReleased, Next: store.Holder{Label: "w", Instance: "i2"}}},
		{"ReleasedNobodyWaits", `{"n":"billing","k":"r","nl":"","ni":""}`,
			store.Notice{Name: "billing", Kind: store.NoticeReleased}},
		{"OlderLibrarysBareName", `billing`, store.Notice{Name: "billing"}},
		{"AcquiredWithoutTTLSaysNothing", `{"n":"billing","k":"a","hl":"w","hi":"i1"}`, store.Notice{Name: "billing"}},
		{"UnknownKind", `{"n":"billing","k":"x"}`, store.Notice{Name: "billing"}},
		{"JSONWithoutName", `{"k":"r"}`, store.Notice{Name: `{"k":"r"}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, storekit.DecodeNotice(tc.payload))
		})
	}
}

func TestDecodeNotices(t *testing.T) {
	t.Parallel()
	acquired := func(name, instance string) store.Notice {
		return store.Notice{Name: name, Kind: store.NoticeAcquired, Holder: store.Holder{Label: "w", Instance: instance}, Remaining: time.Second}
	}
	for _, tc := range []struct {
		name, payload string
		want          []store.Notice
	}{
		{"BatchOfAcquisitions", `[{"n":"a","k":"a","hl":"w","hi":"i1","ttl":1000000},{"n":"b","k":"a","hl":"w","hi":"i2","ttl":1000000}]`,
			[]store.Notice{acquired("a", "i1"), acquired("b", "i2")}},
		{"One", `{"n":"a","k":"a","hl":"w","hi":"i1","ttl":1000000}`, []store.Notice{acquired("a", "i1")}},
		{"BareNameLikeAnArray", `[1]`, []store.Notice{{Name: "[1]"}}},
		{"ArrayWithANameless", `[{"n":"a","k":"r"},{"k":"r"}]`, []store.Notice{{Name: `[{"n":"a","k":"r"},{"k":"r"}]`}}},
		{"EmptyArray", `[]`, []store.Notice{{Name: "[]"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, storekit.DecodeNotices(tc.payload))
		})
	}
}

func TestEncodeNoticeReadsBack(t *testing.T) {
	t.Parallel()
	for _, n := range []store.Notice{
		{Name: "billing", Kind: store.NoticeAcquired, Holder: store.Holder{Label: "w", Instance: "i1"}, Remaining: 3 * time.Second},
		{Name: "billing", Kind: store.NoticeReleased, Next: store.Holder{Label: "w", Instance: "i2"}},
		{Name: "billing", Kind: store.NoticeReleased},
		{Name: "billing", Kind: store.NoticeChanged},
		{Name: `"quoted" / name`, Kind: store.NoticeReleased, Next: store.Holder{Label: "l\\", Instance: "ü"}},
	} {
		require.Equal(t, n, storekit.DecodeNotice(storekit.EncodeNotice(n)), "encoded as %s", storekit.EncodeNotice(n))
	}
}
