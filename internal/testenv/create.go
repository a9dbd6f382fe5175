package testenv

import (
	"context"
	"sync"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CreateAll creates objs with c ten at a time, as a parallel kubectl apply would, and fails t if
// any create fails.
func CreateAll[T client.Object](t testing.TB, c client.Client, objs []T) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(objs))
	sem := make(chan struct{}, 10)
	for _, obj := range objs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs <- c.Create(context.Background(), obj)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
