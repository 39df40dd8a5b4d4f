package controller

import (
	"testing"

	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// The controller's caches store VMs and VMIs compact, through the informer
// that expands them: leanCache makes them compact and cacheOptions builds
// its informers with compactcache.NewInformer.
func TestCacheOptions_storeVMsAndVMIsCompact(t *testing.T) {
	cfg := config.Default()
	if cacheOptions(Options{Config: &cfg}).NewInformer == nil {
		t.Fatal("the caches' informers are client-go's own: they would hand out compact objects")
	}
	for _, obj := range []any{fixture.VMI("a"), fixture.VM("a")} {
		got, err := leanCache(obj)
		if err != nil {
			t.Fatal(err)
		}
		switch got.(type) {
		case *snapshot.CompactVMI, *snapshot.CompactVM:
		default:
			t.Errorf("leanCache kept a %T", got)
		}
	}
}
