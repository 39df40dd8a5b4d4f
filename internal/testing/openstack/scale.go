package openstack

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/volumeattach"
	"github.com/gophercloud/gophercloud/v2/pagination"
)

// ScalePrefix starts the name of every server and volume SeedScale makes.
const ScalePrefix = "scale-"

// scaleFlavor is the flavor of SeedScale's servers: the fake driver
// reports 800,000 MB of memory (nova/virt/fake.py), which m1.tiny's 512 MB
// would use up at about 1,560 servers.
const scaleFlavor = "scale"

// ScaleOptions say what SeedScale seeds.
type ScaleOptions struct {
	// Servers is the number of servers to boot (ACTIVE, no network).
	Servers int
	// VolumesPerServer is the number of volumes attached to each server
	// through Nova (default 2).
	VolumesPerServer int
	// Drift is the share of the attachments given drift, from 0 to 1
	// (0.01: one in a hundred), at most one a server, the kinds in turn:
	// Dangling, Forgotten, Leftover.
	Drift float64
	// Parallel is the number of requests in flight while seeding
	// (default 8).
	Parallel int
	// Batch is the number of servers one POST /servers boots (min_count =
	// max_count; default 50).
	Batch int
	// Progress, when set, is told how seeding goes.
	Progress func(format string, args ...any)
}

// Drifted is one attachment SeedScale gave drift: the volume of the server.
type Drifted struct {
	Server, Volume string
}

// Scale is what SeedScale left.
type Scale struct {
	// Servers and Volumes are the IDs, in name order; server i has
	// volumes i*VolumesPerServer and after.
	Servers, Volumes []string
	// Dangling attachments: Nova keeps the mapping, Cinder's attachment was
	// deleted with Nova's service token (DanglingNovaAttachment).
	Dangling []Drifted
	// Forgotten attachments: Nova's mapping was soft-deleted, Cinder keeps
	// the attachment (StaleCinderAttachment).
	Forgotten []Drifted
	// Leftover attachments: a second, reserved Cinder attachment beside
	// the one Nova records (LeftoverCinderAttachment).
	Leftover []Drifted
	// How long each phase took: booting the servers, creating the
	// volumes, attaching them, seeding the drift (with the checks that
	// every server is ACTIVE and every volume in-use).
	Boot, Create, Attach, Drift time.Duration
}

// Attachments is the number of attachments made through Nova.
func (s *Scale) Attachments() int { return len(s.Volumes) }

// SeedScale boots o.Servers servers (multi-create, o.Batch a request),
// creates o.VolumesPerServer volumes for each (o.Parallel at a time),
// attaches them through Nova's os-volume_attachments (o.Parallel servers
// at a time, one volume after the other on each), checks that every server
// is ACTIVE and lists its volumes and every volume is in-use with one
// attachment to its server, and then gives o.Drift of the attachments
// drift. Servers that end in ERROR and volumes that end in error are
// deleted and made again, and attachments that fail are tried again, a few
// rounds each. The world should be one of its own (StartWorld with
// Options.Scale: the tests' worlds allow 10 servers).
func (w *World) SeedScale(ctx context.Context, o ScaleOptions) (*Scale, error) {
	if o.Servers <= 0 {
		return nil, fmt.Errorf("seeding at scale: %d servers: want at least one", o.Servers)
	}
	if o.VolumesPerServer == 0 {
		o.VolumesPerServer = 2
	}
	if o.VolumesPerServer < 0 {
		return nil, fmt.Errorf("seeding at scale: %d volumes a server: want at least one", o.VolumesPerServer)
	}
	if o.Drift < 0 || o.Drift > 1 || math.IsNaN(o.Drift) {
		return nil, fmt.Errorf("seeding at scale: drift %v: want a share from 0 to 1", o.Drift)
	}
	if o.Parallel <= 0 {
		o.Parallel = 8
	}
	if o.Batch <= 0 {
		o.Batch = 50
	}
	if o.Progress == nil {
		o.Progress = func(string, ...any) {}
	}
	nova, err := w.NewComputeClient()
	if err != nil {
		return nil, err
	}
	cinder, err := w.NewBlockStorageClient()
	if err != nil {
		return nil, err
	}
	sd := &scaleSeed{w: w, o: o, nova: nova, cinder: cinder}
	s := &Scale{}
	t0 := time.Now()
	if s.Servers, err = sd.boot(ctx); err != nil {
		return nil, err
	}
	s.Boot = time.Since(t0)
	t0 = time.Now()
	if s.Volumes, err = sd.createVolumes(ctx, o.Servers*o.VolumesPerServer); err != nil {
		return nil, err
	}
	s.Create = time.Since(t0)
	t0 = time.Now()
	if err := sd.attach(ctx, s); err != nil {
		return nil, err
	}
	s.Attach = time.Since(t0)
	t0 = time.Now()
	if err := sd.drift(ctx, s); err != nil {
		return nil, err
	}
	s.Drift = time.Since(t0)
	return s, nil
}

type scaleSeed struct {
	w            *World
	o            ScaleOptions
	nova, cinder *gophercloud.ServiceClient
}

// rounds is how often a phase makes again what ended in error.
const rounds = 5

// scaleServer is the part of a server SeedScale reads.
type scaleServer struct {
	ID        string  `json:"id"`
	Name      string  `json:"name"`
	Status    string  `json:"status"`
	TaskState *string `json:"OS-EXT-STS:task_state"`
	Volumes   []struct {
		ID string `json:"id"`
	} `json:"os-extended-volumes:volumes_attached"`
}

// servers lists SeedScale's servers in name order.
func (sd *scaleSeed) servers(ctx context.Context) ([]scaleServer, error) {
	return sd.serversIn(ctx, "")
}

// serversIn lists SeedScale's servers with the status (any when empty)
// in name order.
func (sd *scaleSeed) serversIn(ctx context.Context, status string) ([]scaleServer, error) {
	return sd.listServers(ctx, servers.List, status)
}

// building lists the IDs and names alone (GET /servers, no detail) of
// SeedScale's servers with the status: a thousand servers in BUILD are
// read every few seconds while they boot, and the detail of each would
// take Nova's time from booting them.
func (sd *scaleSeed) building(ctx context.Context, status string) ([]scaleServer, error) {
	return sd.listServers(ctx, servers.ListSimple, status)
}

func (sd *scaleSeed) listServers(ctx context.Context, list func(*gophercloud.ServiceClient, servers.ListOptsBuilder) pagination.Pager, status string) ([]scaleServer, error) {
	pages, err := list(sd.nova, servers.ListOpts{Name: "^" + ScalePrefix, Status: status}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing servers: %w", err)
	}
	var out []scaleServer
	if err := pages.(servers.ServerPage).ExtractIntoSlicePtr(&out, "servers"); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b scaleServer) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// scaleVolume is the part of a volume SeedScale reads.
type scaleVolume struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Status      string `json:"status"`
	Attachments []struct {
		ServerID     string `json:"server_id"`
		AttachmentID string `json:"attachment_id"`
	} `json:"attachments"`
}

// volumes lists SeedScale's volumes in name order.
func (sd *scaleSeed) volumes(ctx context.Context) ([]scaleVolume, error) {
	return sd.volumesIn(ctx, "")
}

// volumesIn lists SeedScale's volumes with the status (any when empty) in
// name order.
func (sd *scaleSeed) volumesIn(ctx context.Context, status string) ([]scaleVolume, error) {
	pages, err := volumes.List(sd.cinder, volumes.ListOpts{Status: status}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing volumes: %w", err)
	}
	var all []scaleVolume
	if err := pages.(volumes.VolumePage).ExtractIntoSlicePtr(&all, "volumes"); err != nil {
		return nil, err
	}
	out := all[:0]
	for _, v := range all {
		if strings.HasPrefix(v.Name, ScalePrefix) {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b scaleVolume) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// parallel runs do on each item, o.Parallel at a time, and returns the
// errors joined.
func (sd *scaleSeed) parallel(n int, do func(i int) error) error {
	work := make(chan int)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range min(sd.o.Parallel, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := do(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	return errors.Join(errs...)
}

// settle polls pending until nothing is in flight; it gives up when the
// count has not changed for stuckAfter. pending reads only what is in flight
// (a list filtered by status): a full list of thousands of servers every
// few seconds would take much of the services' time.
func (sd *scaleSeed) settle(ctx context.Context, what string, pending func(context.Context) (int, string, error)) error {
	last, since := -1, time.Now()
	for {
		left, state, err := pending(ctx)
		if err != nil {
			return err
		}
		sd.o.Progress("%s: %s", what, state)
		if left == 0 {
			return nil
		}
		// Any change is movement: while Nova schedules a batch, its
		// servers' BUILD count can go up as well as down (the list merges
		// build requests and the cell's instances).
		if left != last {
			last, since = left, time.Now()
		}
		if time.Since(since) > stuckAfter {
			return fmt.Errorf("%s: still %s, and nothing moved for %s; logs in %s", what, state, stuckAfter, sd.w.Dir+"/logs")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(3 * time.Second):
		}
	}
}

// stuckAfter is how long seeding waits for a phase that does not move.
const stuckAfter = 10 * time.Minute

// inStatus counts what list finds in each status.
func inStatus[T any](ctx context.Context, list func(context.Context, string) ([]T, error), statuses ...string) (int, string, error) {
	total := 0
	parts := make([]string, 0, len(statuses))
	for _, st := range statuses {
		items, err := list(ctx, st)
		if err != nil {
			return 0, "", err
		}
		total += len(items)
		parts = append(parts, fmt.Sprintf("%d %s", len(items), st))
	}
	return total, strings.Join(parts, ", "), nil
}

// boot boots the servers, a batch a request, and waits until none is
// building; servers in ERROR are deleted and booted again.
func (sd *scaleSeed) boot(ctx context.Context) ([]string, error) {
	if err := flavors.Create(ctx, sd.nova, flavors.CreateOpts{ID: scaleFlavor, Name: scaleFlavor, RAM: 64, VCPUs: 1, Disk: ptr(1)}).Err; err != nil &&
		!gophercloud.ResponseCodeIs(err, http.StatusConflict) {
		return nil, fmt.Errorf("creating flavor %s: %w", scaleFlavor, err)
	}
	n := sd.o.Servers
	for round := range rounds {
		have, err := sd.servers(ctx)
		if err != nil {
			return nil, err
		}
		var broken []string
		for _, s := range have {
			if s.Status == "ERROR" {
				broken = append(broken, s.ID)
			}
		}
		if len(broken) > 0 {
			sd.o.Progress("servers: deleting %d in ERROR", len(broken))
			if err := sd.parallel(len(broken), func(i int) error { return servers.Delete(ctx, sd.nova, broken[i]).ExtractErr() }); err != nil {
				return nil, fmt.Errorf("deleting servers in ERROR: %w", err)
			}
		}
		missing := n - (len(have) - len(broken))
		var batches []int
		for left := missing; left > 0; left -= sd.o.Batch {
			batches = append(batches, min(left, sd.o.Batch))
		}
		sd.o.Progress("servers: booting %d in %d requests (round %d)", missing, len(batches), round+1)
		// Two requests at a time: one Nova API worker takes a batch's
		// build requests in one go, and the conductor and compute follow.
		err = sd.parallelAtMost(2, len(batches), func(i int) error {
			name := fmt.Sprintf("%sr%db%03d", ScalePrefix, round, i)
			return servers.Create(ctx, sd.nova, servers.CreateOpts{
				Name: name, ImageRef: ImageID, FlavorRef: scaleFlavor, Networks: "none",
				Min: batches[i], Max: batches[i],
			}, nil).Err
		})
		if err != nil {
			return nil, fmt.Errorf("booting servers: %w", err)
		}
		err = sd.settle(ctx, "servers", func(ctx context.Context) (int, string, error) {
			building, state, err := inStatus(ctx, sd.building, "BUILD")
			if err != nil || len(broken) == 0 {
				return building, state, err
			}
			// The servers in ERROR are deleted before the next round.
			deleting := 0
			for _, id := range broken {
				err := servers.Get(ctx, sd.nova, id).Err
				if err == nil {
					deleting++
				} else if !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
					return 0, "", err
				}
			}
			return building + deleting, fmt.Sprintf("%s, %d in ERROR being deleted", state, deleting), nil
		})
		if err != nil {
			return nil, err
		}
		got, err := sd.servers(ctx)
		if err != nil {
			return nil, err
		}
		ids := idsIn(got, func(s scaleServer) (string, string) { return s.ID, s.Status }, "ACTIVE")
		sd.o.Progress("servers: %d of %d ACTIVE", len(ids), n)
		if len(ids) == n && len(got) == n {
			return ids, nil
		}
		if len(ids) > n {
			return nil, fmt.Errorf("booting servers: %d ACTIVE, want %d: the world was not empty", len(ids), n)
		}
	}
	return nil, fmt.Errorf("booting servers: not all %d ACTIVE after %d rounds; nova log:\n%s", n, rounds, sd.w.LogTail("nova", 20))
}

// parallelAtMost is parallel with at most k in flight.
func (sd *scaleSeed) parallelAtMost(k, n int, do func(i int) error) error {
	c := *sd
	c.o.Parallel = min(k, sd.o.Parallel)
	return c.parallel(n, do)
}

func ptr[T any](v T) *T { return &v }

// createVolumes creates n 1 GiB volumes and waits until all are
// available; volumes in error are deleted and created again.
func (sd *scaleSeed) createVolumes(ctx context.Context, n int) ([]string, error) {
	for round := range rounds {
		have, err := sd.volumes(ctx)
		if err != nil {
			return nil, err
		}
		named := map[string]bool{}
		var broken []string
		for _, v := range have {
			if strings.HasPrefix(v.Status, "error") {
				broken = append(broken, v.ID)
				continue
			}
			named[v.Name] = true
		}
		if len(broken) > 0 {
			sd.o.Progress("volumes: deleting %d in error", len(broken))
			if err := sd.parallel(len(broken), func(i int) error { return volumes.Delete(ctx, sd.cinder, broken[i], nil).ExtractErr() }); err != nil {
				return nil, fmt.Errorf("deleting volumes in error: %w", err)
			}
		}
		var missing []string
		for i := range n {
			if name := fmt.Sprintf("%sv%05d", ScalePrefix, i); !named[name] {
				missing = append(missing, name)
			}
		}
		sd.o.Progress("volumes: creating %d (round %d)", len(missing), round+1)
		err = sd.parallel(len(missing), func(i int) error {
			return volumes.Create(ctx, sd.cinder, volumes.CreateOpts{Name: missing[i], Size: 1}, nil).Err
		})
		if err != nil {
			return nil, fmt.Errorf("creating volumes: %w", err)
		}
		err = sd.settle(ctx, "volumes", func(ctx context.Context) (int, string, error) {
			return inStatus(ctx, sd.volumesIn, "creating", "deleting")
		})
		if err != nil {
			return nil, err
		}
		got, err := sd.volumes(ctx)
		if err != nil {
			return nil, err
		}
		ids := idsIn(got, func(v scaleVolume) (string, string) { return v.ID, v.Status }, "available")
		sd.o.Progress("volumes: %d of %d available", len(ids), n)
		if len(ids) == n && len(got) == n {
			return ids, nil
		}
	}
	return nil, fmt.Errorf("creating volumes: not all %d available after %d rounds; cinder log:\n%s", n, rounds, sd.w.LogTail("cinder", 20))
}

// idsIn returns the IDs of the items in the status, in their order.
func idsIn[T any](items []T, idStatus func(T) (string, string), want string) []string {
	var ids []string
	for _, it := range items {
		if id, status := idStatus(it); status == want {
			ids = append(ids, id)
		}
	}
	return ids
}

// attach attaches volume i*k+j to server i through Nova, one volume after
// the other on each server, and checks the result from both sides.
func (sd *scaleSeed) attach(ctx context.Context, s *Scale) error {
	k := sd.o.VolumesPerServer
	want := map[string]string{} // volume → its server
	for i, srv := range s.Servers {
		for j := range k {
			want[s.Volumes[i*k+j]] = srv
		}
	}
	for round := range rounds {
		vs, err := sd.volumes(ctx)
		if err != nil {
			return err
		}
		todo := map[string][]string{} // server → its volumes to attach
		for _, v := range vs {
			if v.Status == "available" {
				todo[want[v.ID]] = append(todo[want[v.ID]], v.ID)
			}
		}
		if len(todo) == 0 {
			break
		}
		var order []string
		for srv := range todo {
			order = append(order, srv)
		}
		slices.Sort(order)
		sd.o.Progress("attachments: attaching volumes to %d servers through Nova (round %d)", len(order), round+1)
		var mu sync.Mutex
		failed := 0
		err = sd.parallel(len(order), func(i int) error {
			for _, v := range todo[order[i]] {
				if err := volumeattach.Create(ctx, sd.nova, order[i], volumeattach.CreateOpts{VolumeID: v}).Err; err != nil {
					mu.Lock()
					failed++ // tried again in the next round
					mu.Unlock()
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if failed > 0 {
			sd.o.Progress("attachments: %d requests failed; trying them again", failed)
		}
		if err := sd.settle(ctx, "attachments", func(ctx context.Context) (int, string, error) {
			return inStatus(ctx, sd.volumesIn, "reserved", "attaching")
		}); err != nil {
			return err
		}
	}
	return sd.verify(ctx, s)
}

// verify checks that every server is ACTIVE and lists exactly its
// volumes, and every volume is in-use with one attachment, to its server.
func (sd *scaleSeed) verify(ctx context.Context, s *Scale) error {
	k := sd.o.VolumesPerServer
	ss, err := sd.servers(ctx)
	if err != nil {
		return err
	}
	vs, err := sd.volumes(ctx)
	if err != nil {
		return err
	}
	if len(ss) != len(s.Servers) || len(vs) != len(s.Volumes) {
		return fmt.Errorf("after attaching: %d servers and %d volumes, want %d and %d", len(ss), len(vs), len(s.Servers), len(s.Volumes))
	}
	byID := map[string]scaleVolume{}
	for _, v := range vs {
		byID[v.ID] = v
	}
	var bad []string
	for i, srv := range ss {
		wantVols := s.Volumes[i*k : (i+1)*k]
		var got []string
		for _, v := range srv.Volumes {
			got = append(got, v.ID)
		}
		slices.Sort(got)
		if srv.ID != s.Servers[i] || srv.Status != "ACTIVE" || srv.TaskState != nil || !slices.Equal(got, slices.Sorted(slices.Values(wantVols))) {
			bad = append(bad, fmt.Sprintf("server %s (%s) %s lists %v, want ACTIVE listing %v", srv.Name, srv.ID, srv.Status, got, wantVols))
		}
		for _, id := range wantVols {
			v := byID[id]
			if v.Status != "in-use" || len(v.Attachments) != 1 || v.Attachments[0].ServerID != srv.ID {
				bad = append(bad, fmt.Sprintf("volume %s (%s) is %s with attachments %+v, want in-use by %s", v.Name, id, v.Status, v.Attachments, srv.ID))
			}
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("after attaching, %d problems, the first: %s", len(bad), strings.Join(bad[:min(5, len(bad))], "; "))
	}
	sd.o.Progress("checked: %d servers ACTIVE, %d volumes in-use, each attached to its server on both sides", len(ss), len(vs))
	return nil
}

// drift gives o.Drift of the attachments drift, spread over the servers,
// one a server, the kinds in turn.
func (sd *scaleSeed) drift(ctx context.Context, s *Scale) error {
	k := sd.o.VolumesPerServer
	n := int(math.Round(sd.o.Drift * float64(s.Attachments())))
	n = min(n, len(s.Servers))
	if n == 0 {
		return nil
	}
	vs, err := sd.volumes(ctx)
	if err != nil {
		return err
	}
	attachment := map[string]string{}
	for _, v := range vs {
		if len(v.Attachments) == 1 {
			attachment[v.ID] = v.Attachments[0].AttachmentID
		}
	}
	for i := range n {
		srv := i * len(s.Servers) / n
		d := Drifted{Server: s.Servers[srv], Volume: s.Volumes[srv*k+i%k]}
		switch i % 3 {
		case 0:
			if err := deleteAttachmentAsNova(sd.cinder, attachment[d.Volume]); err != nil {
				return err
			}
			s.Dangling = append(s.Dangling, d)
		case 1:
			if err := sd.w.forgetBDM(d.Server, d.Volume); err != nil {
				return err
			}
			s.Forgotten = append(s.Forgotten, d)
		case 2:
			if _, err := reserve(sd.cinder, d.Server, d.Volume); err != nil {
				return err
			}
			s.Leftover = append(s.Leftover, d)
		}
	}
	// A dangling mapping's volume becomes available once Cinder has
	// deleted the attachment.
	dangling := map[string]bool{}
	for _, d := range s.Dangling {
		dangling[d.Volume] = true
	}
	return sd.settle(ctx, "drift", func(ctx context.Context) (int, string, error) {
		left := 0
		for id := range dangling {
			var v scaleVolume
			if err := volumes.Get(ctx, sd.cinder, id).ExtractIntoStructPtr(&v, "volume"); err != nil {
				return 0, "", err
			}
			if v.Status != "available" {
				left++
			}
		}
		return left, fmt.Sprintf("%d dangling, %d forgotten, %d leftover; %d volumes still to become available", len(s.Dangling), len(s.Forgotten), len(s.Leftover), left), nil
	})
}
