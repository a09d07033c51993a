package registry

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tenure-dev/tenure/store"
)

// Limits the registry enforces on its input. A call outside them fails with
// an error matching [store.ErrInvalid] and writes nothing.
const (
	// MaxAgentIDLen is the longest agent id, in bytes.
	MaxAgentIDLen = 255
	// MaxResourceLen is the longest resource id, in bytes.
	MaxResourceLen = 255
	// MaxAddressLen is the longest agent address, in bytes.
	MaxAddressLen = 1024
	// MaxLabels is the most labels one agent may carry.
	MaxLabels = 64
	// MaxLabelKeyLen is the longest label key, in bytes. Keys are made of
	// ASCII letters, digits and . _ / -.
	MaxLabelKeyLen = 63
	// MaxLabelValueLen is the longest label value, in bytes.
	MaxLabelValueLen = 255
	// MaxJSONLen is the longest capacity or metadata document, in bytes.
	MaxJSONLen = 16 << 10
	// MaxReasonLen is the longest reassignment reason, in bytes.
	MaxReasonLen = 1024
)

// ValidateAgentID reports whether id can be an agent id: non-empty valid
// UTF-8 of at most [MaxAgentIDLen] bytes without control characters.
func ValidateAgentID(id string) error { return store.ValidateText("agent id", id, MaxAgentIDLen) }

// ValidateResource reports whether id can be a resource id: non-empty valid
// UTF-8 of at most [MaxResourceLen] bytes without control characters.
func ValidateResource(id string) error { return store.ValidateText("resource id", id, MaxResourceLen) }

func validateLabels(labels map[string]string) error {
	if len(labels) > MaxLabels {
		return fmt.Errorf("%w: %d labels; the maximum is %d", store.ErrInvalid, len(labels), MaxLabels)
	}
	for k, v := range labels {
		if k == "" {
			return fmt.Errorf("%w: a label key is empty", store.ErrInvalid)
		}
		if len(k) > MaxLabelKeyLen {
			return fmt.Errorf("%w: label key %q is %d bytes long; the maximum is %d", store.ErrInvalid, k, len(k), MaxLabelKeyLen)
		}
		for _, r := range k {
			if !labelKeyRune(r) {
				return fmt.Errorf("%w: label key %q contains %q; use ASCII letters, digits and . _ / -", store.ErrInvalid, k, r)
			}
		}
		if len(v) > MaxLabelValueLen {
			return fmt.Errorf("%w: value of label %q is %d bytes long; the maximum is %d", store.ErrInvalid, k, len(v), MaxLabelValueLen)
		}
		if v == "" {
			continue
		}
		if err := store.ValidateText(fmt.Sprintf("value of label %q", k), v, MaxLabelValueLen); err != nil {
			return err
		}
	}
	return nil
}

func labelKeyRune(r rune) bool {
	return (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') ||
		r == '.' || r == '_' || r == '/' || r == '-'
}

// jsonArg validates an optional JSON document and returns it as the text
// bind parameter the SQL casts to jsonb: nil (SQL NULL) when doc is empty.
func jsonArg(what string, doc json.RawMessage) (*string, error) {
	if len(doc) == 0 {
		return nil, nil
	}
	if len(doc) > MaxJSONLen {
		return nil, fmt.Errorf("%w: %s is %d bytes long; the maximum is %d", store.ErrInvalid, what, len(doc), MaxJSONLen)
	}
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return nil, fmt.Errorf("%w: %s is not valid JSON: %w", store.ErrInvalid, what, err)
	}
	if hasNUL(v) {
		return nil, fmt.Errorf("%w: %s contains the character U+0000, which PostgreSQL's jsonb cannot store", store.ErrInvalid, what)
	}
	s := string(doc)
	return &s, nil
}

// hasNUL reports whether a decoded JSON value has U+0000 in a string or key.
func hasNUL(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.ContainsRune(v, 0)
	case []any:
		for _, e := range v {
			if hasNUL(e) {
				return true
			}
		}
	case map[string]any:
		for k, e := range v {
			if strings.ContainsRune(k, 0) || hasNUL(e) {
				return true
			}
		}
	}
	return false
}
