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
	pc, _ := w.authenticate(t)
	return pc
}

func (w *World) authenticate(t testing.TB) (*gophercloud.ProviderClient, gophercloud.EndpointOpts) {
	t.Helper()
	return w.authenticateIn(t, "")
}

// authenticateIn authenticates as the clouds.yaml's user, scoped to
// project (the clouds.yaml's own when empty). The world's Keystone stub
// gives that user the admin role in any project, and its catalog names the
// project in Cinder's endpoint.
func (w *World) authenticateIn(t testing.TB, project string) (*gophercloud.ProviderClient, gophercloud.EndpointOpts) {
	t.Helper()
	opts := []clouds.ParseOption{clouds.WithCloudName(w.Cloud), clouds.WithLocations(w.CloudsYAML)}
	if project != "" {
		opts = append(opts, clouds.WithProjectID(project))
	}
	ao, eo, _, err := clouds.Parse(opts...)
	if err != nil {
		t.Fatalf("reading %s: %v", w.CloudsYAML, err)
	}
	pc, err := gcos.AuthenticatedClient(context.Background(), ao)
	if err != nil {
		t.Fatalf("authenticating with cloud %s of %s: %v", w.Cloud, w.CloudsYAML, err)
	}
	return pc, eo
}

// serviceClient finds a service in the catalog with newClient and sets its
// microversion.
func (w *World) serviceClient(t testing.TB, service, microversion string,
	newClient func(*gophercloud.ProviderClient, gophercloud.EndpointOpts) (*gophercloud.ServiceClient, error)) *gophercloud.ServiceClient {
	t.Helper()
	c, err := newClient(w.authenticate(t))
	if err != nil {
		t.Fatalf("%s endpoint of cloud %s: %v", service, w.Cloud, err)
	}
	c.Microversion = microversion
	return c
}

// BlockStorageClientIn is a Cinder client scoped to another project (its
// volumes are created in that project), at BlockStorageMicroversion.
func (w *World) BlockStorageClientIn(t testing.TB, project string) *gophercloud.ServiceClient {
	t.Helper()
	c, err := gcos.NewBlockStorageV3(w.authenticateIn(t, project))
	if err != nil {
		t.Fatalf("block-storage endpoint of cloud %s in project %s: %v", w.Cloud, project, err)
	}
	c.Microversion = BlockStorageMicroversion
	return c
}

// ComputeClient is a Nova client found through the catalog, at
// ComputeMicroversion.
func (w *World) ComputeClient(t testing.TB) *gophercloud.ServiceClient {
	t.Helper()
	return w.serviceClient(t, "compute", ComputeMicroversion, gcos.NewComputeV2)
}

// BlockStorageClient is a Cinder client found through the catalog, at
// BlockStorageMicroversion.
func (w *World) BlockStorageClient(t testing.TB) *gophercloud.ServiceClient {
	t.Helper()
	return w.serviceClient(t, "block-storage", BlockStorageMicroversion, gcos.NewBlockStorageV3)
}
