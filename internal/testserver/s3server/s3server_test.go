package s3server_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/s3server"
	"github.com/tenure-dev/tenure/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// TestConditionalPutAndRestart checks what fence/s3fence relies on:
// the server refuses a second create with If-None-Match: * and a write
// whose If-Match names an old ETag with 412, and a restart keeps the data.
func TestConditionalPutAndRestart(t *testing.T) {
	t.Parallel()
	m := s3server.Own(t)
	c := m.Client(t)
	ctx := t.Context()
	bucket := m.Bucket(t)
	put := func(body string, cond func(*s3.PutObjectInput)) (*s3.PutObjectOutput, error) {
		in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), Body: strings.NewReader(body)}
		cond(in)
		return c.PutObject(ctx, in)
	}
	requireStatus := func(err error, status int) {
		t.Helper()
		var re *smithyhttp.ResponseError
		require.True(t, errors.As(err, &re), "%v", err)
		require.Equal(t, status, re.HTTPStatusCode(), "%v", err)
	}

	first, err := put("one", func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String("*") })
	require.NoError(t, err)
	_, err = put("two", func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String("*") })
	requireStatus(err, 412)
	_, err = put("two", func(in *s3.PutObjectInput) { in.IfMatch = first.ETag })
	require.NoError(t, err)
	_, err = put("three", func(in *s3.PutObjectInput) { in.IfMatch = first.ETag })
	requireStatus(err, 412)

	require.NoError(t, m.Restart(ctx))
	got, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("k")})
	require.NoError(t, err)
	defer func() { require.NoError(t, got.Body.Close()) }()
	b, err := io.ReadAll(got.Body)
	require.NoError(t, err)
	require.Equal(t, "two", string(b))
}
