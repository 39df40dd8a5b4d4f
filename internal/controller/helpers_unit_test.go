package controller

import (
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/controller/records"
	"github.com/tether-dev/tether/internal/testing/fakeclient"
)

// t0 is the unit tests' clock.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeClient and graceConfig are fixture's, by their short names here.
var (
	fakeClient  = fakeclient.FakeClient
	graceConfig = fakeclient.GraceConfig
)

// testRecords returns a record keeper on c whose clock is t0 and which has
// watched all along.
func testRecords(c client.Client, cfg *config.Config) *records.Keeper {
	rs := records.New(cfg)
	rs.Cache, rs.Live, rs.Namespace, rs.Identity = c, c, "tether-system", "test"
	rs.Now, rs.Log = func() time.Time { return t0 }, logr.Discard()
	rs.WatchingSince(t0.Add(-24 * time.Hour))
	return rs
}

// statusBy is fakeclient.StatusBy.
var statusBy = fakeclient.StatusBy
