package storekit_test

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/storekit"
)

func TestLoadFunctions(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"f/acquire.sql":      {Data: []byte("-- revision 2\nCREATE OR REPLACE FUNCTION {{acquire_fn}}() ...;\n")},
		"f/renew.sql":        {Data: []byte("-- revision 1\nCREATE OR REPLACE FUNCTION {{renew_fn}}() ...;\n")},
		"norev/a.sql":        {Data: []byte("CREATE OR REPLACE FUNCTION a() ...;\n")},
		"zero/a.sql":         {Data: []byte("-- revision 0\n")},
		"badname/Acq.sql":    {Data: []byte("-- revision 1\n")},
		"badname/notsql.txt": {Data: []byte("-- revision 1\n")},
	}
	fns, err := storekit.LoadFunctions("owner", fsys, "f")
	require.NoError(t, err)
	require.Len(t, fns, 2)
	require.Equal(t, "acquire", fns[0].Name)
	require.Equal(t, 2, fns[0].Revision)
	require.Equal(t, "renew", fns[1].Name)
	require.Len(t, fns[0].Hash, 64)
	require.NotEqual(t, fns[0].Hash, fns[1].Hash)
	_, err = storekit.LoadFunctions("owner", fsys, "norev")
	require.ErrorContains(t, err, `owner: embedded function file "a.sql" does not start with a line "-- revision N"`)
	_, err = storekit.LoadFunctions("owner", fsys, "zero")
	require.ErrorContains(t, err, `does not start with a line "-- revision N"`)
	_, err = storekit.LoadFunctions("owner", fsys, "badname")
	require.ErrorContains(t, err, "is not named name.sql")
	_, err = storekit.LoadFunctions("owner", fsys, "missing")
	require.ErrorContains(t, err, "owner: embedded functions are missing")
}

func TestFunctionState(t *testing.T) {
	t.Parallel()
	f := storekit.Function{Name: "renew", Revision: 2, Hash: "h2"}
	for name, tc := range map[string]struct {
		rec  storekit.Recorded
		ok   bool
		want string
	}{
		"Missing": {want: "missing"},
		"Current": {rec: storekit.Recorded{Revision: 2, Hash: "h2"}, ok: true, want: ""},
		"Changed": {rec: storekit.Recorded{Revision: 2, Hash: "other"}, ok: true, want: "changed"},
		"Older":   {rec: storekit.Recorded{Revision: 1, Hash: "h1"}, ok: true, want: "older"},
		"Newer":   {rec: storekit.Recorded{Revision: 3, Hash: "h3"}, ok: true, want: "newer"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, storekit.FunctionState(f, tc.rec, tc.ok))
		})
	}
}
