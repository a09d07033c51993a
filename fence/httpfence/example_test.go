package httpfence_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/tenure-dev/tenure/store"

	"github.com/tenure-dev/tenure/fence/httpfence"
)

// A service fences PUT /reports/{id}; a holder superseded by token 8 is
// refused with 409, and its client sees store.ErrFenced.
func Example() {
	mw, err := httpfence.Middleware(httpfence.Config{
		Store:    httpfence.NewMemory(),
		Resource: func(r *http.Request) string { return "reports/" + r.PathValue("id") },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	mux.Handle("PUT /reports/{id}", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("report written")
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	put := func(tok store.Token) error {
		client := &http.Client{Transport: &httpfence.Transport{Token: func() store.Token { return tok }}}
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPut, srv.URL+"/reports/42", strings.NewReader("..."))
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return httpfence.ResponseError(resp)
	}

	fmt.Println("new holder:", put(8))
	err = put(7)
	fmt.Println("old holder fenced:", errors.Is(err, store.ErrFenced))
	fmt.Println(err)
	// Output:
	// report written
	// new holder: <nil>
	// old holder fenced: true
	// httpfence: tenure: fenced: resource "reports/42" already accepted token 8; token 7 is stale (its holder was superseded)
}
