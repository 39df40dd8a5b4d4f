package controller

import (
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/config"
)

// TestWebhookOptions: "flags -> outcome".
func TestWebhookOptions(t *testing.T) {
	withProtection := func(on bool) *config.Config {
		c := config.Default()
		c.Checks = map[string]config.CheckConfig{"OrphanHotplugVolume": {Enabled: true}}
		c.Protection.Enabled = on
		return &c
	}
	cases := []struct {
		name       string
		addr       string
		protection bool
		wantErr    string
		serves     bool
	}{
		{name: "disabled -> no server", addr: "0", protection: true},
		{name: "empty -> no server", addr: "", protection: true},
		{name: "port with protection -> server", addr: ":9443", protection: true, serves: true},
		{name: "port without protection -> error naming protection.enabled", addr: ":9443", wantErr: "protection.enabled"},
		{name: "no port -> error naming the flag", addr: "9443", protection: true, wantErr: "--webhook-bind-address"},
		{name: "port out of range -> error naming the flag", addr: ":70000", protection: true, wantErr: "--webhook-bind-address"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o, _, _, err := complete(Options{Config: withProtection(c.protection), WebhookAddr: c.addr})
			if err == nil {
				var s any
				s, err = webhookServer(o)
				if err == nil && (s != nil) != c.serves {
					t.Errorf("server %v, want serving %v", s, c.serves)
				}
			}
			if (err != nil) != (c.wantErr != "") || (err != nil && !strings.Contains(err.Error(), c.wantErr)) {
				t.Fatalf("error %v, want one naming %q", err, c.wantErr)
			}
		})
	}
}
