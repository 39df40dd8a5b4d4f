package observe

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
	gopenstack "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"sigs.k8s.io/yaml"
)

// Microversions tether speaks. Compute 2.89 (Nova 24.0.0, Xena) shows the
// Cinder attachment id and BDM uuid of each mapping
// (api-ref/source/os-volume-attachments.inc); block-storage 3.27 (Ocata)
// lists attachments, 3.44 completes one and 3.54 creates one with a mode
// (cinder/api/microversions.py).
const (
	ComputeMicroversion      = "2.89"
	BlockStorageMicroversion = "3.27"
)

// Clients are the Nova and Cinder clients tether reads (and act writes)
// with.
type Clients struct {
	Compute      *gophercloud.ServiceClient
	BlockStorage *gophercloud.ServiceClient
}

// ConnectOptions say which cloud to use and how to reach it.
type ConnectOptions struct {
	// Cloud is the cloud's name in clouds.yaml (--os-cloud, default
	// $OS_CLOUD).
	Cloud string
	// CloudsYAML is the clouds.yaml to read; empty searches it as the
	// openstack CLI does ($OS_CLIENT_CONFIG_FILE, ./clouds.yaml,
	// ~/.config/openstack/clouds.yaml, /etc/openstack/clouds.yaml).
	CloudsYAML string
	// Transport, when set, carries every request (tests count them).
	Transport http.RoundTripper
}

// cloudExtras are the clouds.yaml keys of a cloud that gophercloud's
// parser does not return: openstacksdk's endpoint overrides and the
// authentication types without Keystone.
type cloudExtras struct {
	AuthType                     string `json:"auth_type"`
	ComputeEndpointOverride      string `json:"compute_endpoint_override"`
	BlockStorageEndpointOverride string `json:"block_storage_endpoint_override"`
	VolumeV3EndpointOverride     string `json:"volumev3_endpoint_override"`
	Auth                         struct {
		Token string `json:"token"`
	} `json:"auth"`
}

// Connect reads the cloud from clouds.yaml and returns its Nova and Cinder
// clients at tether's microversions. Keystone authentication (password,
// token, application credential) goes through gophercloud and the service
// catalog; auth_type none (or noauth, admin_token) sends auth.token as is
// and needs compute_endpoint_override and block_storage_endpoint_override.
func Connect(ctx context.Context, o ConnectOptions) (*Clients, error) {
	if o.Cloud == "" {
		return nil, fmt.Errorf("no cloud named: pass --os-cloud NAME or set OS_CLOUD, naming a cloud of your clouds.yaml")
	}
	path, err := findCloudsYAML(o.CloudsYAML)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %v", path, err)
	}
	var file struct {
		Clouds map[string]cloudExtras `json:"clouds"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		return nil, fmt.Errorf("%s is not a clouds.yaml: %v", path, err)
	}
	extras, ok := file.Clouds[o.Cloud]
	if !ok {
		return nil, fmt.Errorf("cloud %q is not in %s: pass --os-cloud with one of its clouds", o.Cloud, path)
	}
	ao, eo, tlsConfig, err := clouds.Parse(clouds.WithCloudName(o.Cloud), clouds.WithLocations(path))
	if err != nil {
		return nil, fmt.Errorf("cloud %q in %s: %v", o.Cloud, path, err)
	}
	httpClient := http.Client{Transport: o.Transport}
	if httpClient.Transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = tlsConfig
		httpClient.Transport = t
	}
	var pc *gophercloud.ProviderClient
	c := &Clients{}
	switch extras.AuthType {
	case "none", "noauth", "admin_token":
		pc = &gophercloud.ProviderClient{HTTPClient: httpClient, TokenID: extras.Auth.Token}
		politely(pc)
		pc.UseTokenLock()
		pc.SetToken(extras.Auth.Token)
	default:
		if pc, err = gopenstack.NewClient(ao.IdentityEndpoint); err != nil {
			return nil, fmt.Errorf("cloud %q: auth_url %q: %v", o.Cloud, ao.IdentityEndpoint, err)
		}
		pc.HTTPClient = httpClient
		politely(pc)
		ao.AllowReauth = true
		if err := gopenstack.Authenticate(ctx, pc, ao); err != nil {
			return nil, fmt.Errorf("cloud %q: authenticating at %s: %v", o.Cloud, ao.IdentityEndpoint, err)
		}
	}
	if c.Compute, err = service(pc, eo, "compute", extras.ComputeEndpointOverride, gopenstack.NewComputeV2); err != nil {
		return nil, fmt.Errorf("cloud %q: %v", o.Cloud, err)
	}
	bsOverride := extras.BlockStorageEndpointOverride
	if bsOverride == "" {
		bsOverride = extras.VolumeV3EndpointOverride
	}
	if c.BlockStorage, err = service(pc, eo, "block-storage", bsOverride, gopenstack.NewBlockStorageV3); err != nil {
		return nil, fmt.Errorf("cloud %q: %v", o.Cloud, err)
	}
	c.Compute.Microversion = ComputeMicroversion
	c.BlockStorage.Microversion = BlockStorageMicroversion
	return c, nil
}

// service is the client of one service: at the override when there is
// one, else from the catalog.
func service(pc *gophercloud.ProviderClient, eo gophercloud.EndpointOpts, typ, override string,
	fromCatalog func(*gophercloud.ProviderClient, gophercloud.EndpointOpts) (*gophercloud.ServiceClient, error)) (*gophercloud.ServiceClient, error) {
	if override != "" {
		ep := strings.TrimRight(override, "/") + "/"
		return &gophercloud.ServiceClient{ProviderClient: pc, Endpoint: ep, ResourceBase: ep, Type: typ}, nil
	}
	if pc.EndpointLocator == nil {
		return nil, fmt.Errorf("no %s endpoint: without Keystone, set %s_endpoint_override in clouds.yaml", typ, strings.ReplaceAll(typ, "-", "_"))
	}
	sc, err := fromCatalog(pc, eo)
	if err != nil {
		return nil, fmt.Errorf("no %s endpoint in the service catalog (region %q): %v; set %s_endpoint_override in clouds.yaml to name one",
			typ, eo.Region, err, strings.ReplaceAll(typ, "-", "_"))
	}
	return sc, nil
}

// findCloudsYAML is path, or the first clouds.yaml where the openstack CLI
// looks for one.
func findCloudsYAML(path string) (string, error) {
	if path != "" {
		return path, nil
	}
	if p := os.Getenv("OS_CLIENT_CONFIG_FILE"); p != "" {
		return p, nil
	}
	var where []string
	if wd, err := os.Getwd(); err == nil {
		where = append(where, filepath.Join(wd, "clouds.yaml"))
	}
	if dir, err := os.UserConfigDir(); err == nil {
		where = append(where, filepath.Join(dir, "openstack", "clouds.yaml"))
	}
	where = append(where, "/etc/openstack/clouds.yaml")
	for _, p := range where {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no clouds.yaml found (looked in %s): write one, or point OS_CLIENT_CONFIG_FILE at it", strings.Join(where, ", "))
}
