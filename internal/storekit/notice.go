package storekit

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/tenure-dev/tenure/store"
)

// announcement is the JSON message stores that can compose one (the
// PostgreSQL functions, the Redis scripts, the etcd store's announce/
// keys) announce changes with: k is "a"
// (acquired by hl/hi for ttl microseconds) or "r" (released, kept for
// nl/ni when they are not empty).
type announcement struct {
	Name     string `json:"n"`
	Kind     string `json:"k"`
	Label    string `json:"hl"`
	Instance string `json:"hi"`
	TTL      int64  `json:"ttl"`
	NextL    string `json:"nl"`
	NextI    string `json:"ni"`
}

// DecodeNotice reads one announcement. A message that is not one (sent by
// an older library, which announced the bare name) is a notice of that
// name that does not say what happened.
func DecodeNotice(message string) store.Notice {
	var a announcement
	if err := json.Unmarshal([]byte(message), &a); err != nil || a.Name == "" {
		return store.Notice{Name: message}
	}
	return a.notice()
}

// DecodeNotices reads one message that may carry several announcements: a
// JSON array of them (the acquisitions of one batch), or one as
// [DecodeNotice] reads it.
func DecodeNotices(message string) []store.Notice {
	if strings.HasPrefix(message, "[") {
		var as []announcement
		if err := json.Unmarshal([]byte(message), &as); err == nil && len(as) > 0 &&
			!slices.ContainsFunc(as, func(a announcement) bool { return a.Name == "" }) {
			ns := make([]store.Notice, len(as))
			for i, a := range as {
				ns[i] = a.notice()
			}
			return ns
		}
	}
	return []store.Notice{DecodeNotice(message)}
}

func (a announcement) notice() store.Notice {
	n := store.Notice{Name: a.Name}
	switch {
	case a.Kind == "a" && a.TTL > 0:
		n.Kind = store.NoticeAcquired
		n.Holder = store.Holder{Label: a.Label, Instance: a.Instance}
		n.Remaining = time.Duration(a.TTL) * time.Microsecond
	case a.Kind == "r":
		n.Kind = store.NoticeReleased
		n.Next = store.Holder{Label: a.NextL, Instance: a.NextI}
	}
	return n
}

// EncodeNotice writes n as the announcement [DecodeNotice] reads: an
// acquisition with its holder and remaining time (whole microseconds), or
// a release with the follower next in line. Any other kind is written as a
// bare name, which reads back as [store.NoticeChanged].
func EncodeNotice(n store.Notice) string {
	a := announcement{Name: n.Name}
	switch n.Kind {
	case store.NoticeAcquired:
		a.Kind, a.Label, a.Instance, a.TTL = "a", n.Holder.Label, n.Holder.Instance, n.Remaining.Microseconds()
	case store.NoticeReleased:
		a.Kind, a.NextL, a.NextI = "r", n.Next.Label, n.Next.Instance
	default:
		return n.Name
	}
	b, err := json.Marshal(a)
	if err != nil {
		// Marshalling strings and an integer cannot fail.
		return n.Name
	}
	return string(b)
}
