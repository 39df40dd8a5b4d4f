package observe

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/attachments"
)

// cinderAttachments serves GET /attachments/detail as Cinder does: by
// marker, each page cut at the smaller of the limit asked for and limit
// (its osapi_max_limit), with no next link. It counts the requests.
func cinderAttachments(t *testing.T, n, limit int) (*gophercloud.ServiceClient, *atomic.Int32) {
	t.Helper()
	var requests atomic.Int32
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("a%04d", i)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.URL.Path != "/attachments/detail" {
			http.NotFound(w, r)
			return
		}
		from := 0
		if m := r.URL.Query().Get("marker"); m != "" {
			for from < n && ids[from] != m {
				from++
			}
			from++
		}
		size := limit
		if l, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && l > 0 && l < size {
			size = l
		}
		page := []map[string]string{}
		for i := from; i < min(from+size, n); i++ {
			page = append(page, map[string]string{"id": ids[i], "volume_id": "v" + ids[i], "instance": "s" + ids[i], "status": "attached"})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"attachments": page})
	}))
	t.Cleanup(srv.Close)
	c := &gophercloud.ServiceClient{ProviderClient: &gophercloud.ProviderClient{HTTPClient: *srv.Client()}, Endpoint: srv.URL + "/", ResourceBase: srv.URL + "/"}
	return c, &requests
}

// Cinder's attachment list is read in as many requests as it has pages;
// a page can only be known to be the last when it is shorter than one
// before it, so a list that fills its pages exactly (or has one page)
// takes one more, the empty page.
func TestAttachmentPagesEndAtTheFirstShortPage(t *testing.T) {
	for _, tc := range []struct {
		n, limit, pageSize, want int
	}{
		{n: 2003, limit: 1000, want: 3}, // 1000, 1000, 3
		{n: 2000, limit: 1000, want: 3}, // 1000, 1000, 0
		{n: 7, limit: 1000, want: 2},    // 7, 0: one page says nothing of the limit
		{n: 0, limit: 1000, want: 1},    // 0
		{n: 7, limit: 3, want: 3},       // 3, 3, 1
		{n: 7, limit: 3, pageSize: 2, want: 4},
		{n: 7, limit: 3, pageSize: 5000, want: 3}, // a page size above Cinder's limit: 3, 3, 1
		{n: 3, limit: 1, pageSize: 1, want: 4},    // 1, 1, 1, 0
	} {
		t.Run(fmt.Sprintf("%d at %d, page size %d", tc.n, tc.limit, tc.pageSize), func(t *testing.T) {
			c, requests := cinderAttachments(t, tc.n, tc.limit)
			got, err := listAttachments(context.Background(), c, attachments.ListOpts{AllTenants: true}, tc.pageSize)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.n {
				t.Fatalf("read %d attachments, want %d", len(got), tc.n)
			}
			if r := int(requests.Load()); r != tc.want {
				t.Errorf("%d requests, want %d", r, tc.want)
			}
		})
	}
}
