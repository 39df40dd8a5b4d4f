package openstack

import (
	"context"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	gcos "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
)

// Microversions of the clients the helpers use. Compute 2.89 lists the
// attachment and BDM IDs of a server's volume attachments; block storage 3.54
// creates attachments with a mode (and 3.44 completes them, 3.27 lists them).
const (
	ComputeMicroversion      = "2.89"
	BlockStorageMicroversion = "3.54"
)

// ProviderClient authenticates against the world as its clouds.yaml says,
// the way a user's client does.
func (w *World) ProviderClient(t testing.TB) *gophercloud.ProviderClient {
	t.Helper()
	ao, _, _, err := clouds.Parse(clouds.WithCloudName(w.Cloud), clouds.WithLocations(w.CloudsYAML))
	if err != nil {
		t.Fatalf("reading %s: %v", w.CloudsYAML, err)
	}
	pc, err := gcos.AuthenticatedClient(context.Background(), ao)
	if err != nil {
		t.Fatalf("authenticating with cloud %s of %s: %v", w.Cloud, w.CloudsYAML, err)
	}
	return pc
}

func (w *World) endpointOpts(t testing.TB) gophercloud.EndpointOpts {
	t.Helper()
	_, eo, _, err := clouds.Parse(clouds.WithCloudName(w.Cloud), clouds.WithLocations(w.CloudsYAML))
	if err != nil {
		t.Fatalf("reading %s: %v", w.CloudsYAML, err)
	}
	return eo
}

// ComputeClient is a Nova client found through the catalog, at
// ComputeMicroversion.
func (w *World) ComputeClient(t testing.TB) *gophercloud.ServiceClient {
	t.Helper()
	c, err := gcos.NewComputeV2(w.ProviderClient(t), w.endpointOpts(t))
	if err != nil {
		t.Fatalf("compute endpoint of cloud %s: %v", w.Cloud, err)
	}
	c.Microversion = ComputeMicroversion
	return c
}

// BlockStorageClient is a Cinder client found through the catalog, at
// BlockStorageMicroversion.
func (w *World) BlockStorageClient(t testing.TB) *gophercloud.ServiceClient {
	t.Helper()
	c, err := gcos.NewBlockStorageV3(w.ProviderClient(t), w.endpointOpts(t))
	if err != nil {
		t.Fatalf("block-storage endpoint of cloud %s: %v", w.Cloud, err)
	}
	c.Microversion = BlockStorageMicroversion
	return c
}
