package openstack

import (
	"context"
	"fmt"
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
	pc, _, err := w.authenticateIn("")
	if err != nil {
		t.Fatal(err)
	}
	return pc
}

// authenticateIn authenticates as the clouds.yaml's user, scoped to
// project (the clouds.yaml's own when empty). The world's Keystone stub
// gives that user the admin role in any project, and its catalog names the
// project in Cinder's endpoint.
func (w *World) authenticateIn(project string) (*gophercloud.ProviderClient, gophercloud.EndpointOpts, error) {
	opts := []clouds.ParseOption{clouds.WithCloudName(w.Cloud), clouds.WithLocations(w.CloudsYAML)}
	if project != "" {
		opts = append(opts, clouds.WithProjectID(project))
	}
	ao, eo, _, err := clouds.Parse(opts...)
	if err != nil {
		return nil, eo, fmt.Errorf("reading %s: %v", w.CloudsYAML, err)
	}
	pc, err := gcos.AuthenticatedClient(context.Background(), ao)
	if err != nil {
		return nil, eo, fmt.Errorf("authenticating with cloud %s of %s: %v", w.Cloud, w.CloudsYAML, err)
	}
	return pc, eo, nil
}

// newClient authenticates in project, finds a service in the catalog with
// newService and sets its microversion.
func (w *World) newClient(project, service, microversion string,
	newService func(*gophercloud.ProviderClient, gophercloud.EndpointOpts) (*gophercloud.ServiceClient, error)) (*gophercloud.ServiceClient, error) {
	pc, eo, err := w.authenticateIn(project)
	if err != nil {
		return nil, err
	}
	c, err := newService(pc, eo)
	if err != nil {
		return nil, fmt.Errorf("%s endpoint of cloud %s (project %q): %v", service, w.Cloud, project, err)
	}
	c.Microversion = microversion
	return c, nil
}

// NewComputeClient is ComputeClient outside a test.
func (w *World) NewComputeClient() (*gophercloud.ServiceClient, error) {
	return w.newClient("", "compute", ComputeMicroversion, gcos.NewComputeV2)
}

// NewBlockStorageClient is BlockStorageClient outside a test.
func (w *World) NewBlockStorageClient() (*gophercloud.ServiceClient, error) {
	return w.newClient("", "block-storage", BlockStorageMicroversion, gcos.NewBlockStorageV3)
}

func must(t testing.TB, c *gophercloud.ServiceClient, err error) *gophercloud.ServiceClient {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// BlockStorageClientIn is a Cinder client scoped to another project (its
// volumes are created in that project), at BlockStorageMicroversion.
func (w *World) BlockStorageClientIn(t testing.TB, project string) *gophercloud.ServiceClient {
	t.Helper()
	c, err := w.newClient(project, "block-storage", BlockStorageMicroversion, gcos.NewBlockStorageV3)
	return must(t, c, err)
}

// ComputeClient is a Nova client found through the catalog, at
// ComputeMicroversion.
func (w *World) ComputeClient(t testing.TB) *gophercloud.ServiceClient {
	t.Helper()
	c, err := w.NewComputeClient()
	return must(t, c, err)
}

// BlockStorageClient is a Cinder client found through the catalog, at
// BlockStorageMicroversion.
func (w *World) BlockStorageClient(t testing.TB) *gophercloud.ServiceClient {
	t.Helper()
	c, err := w.NewBlockStorageClient()
	return must(t, c, err)
}
