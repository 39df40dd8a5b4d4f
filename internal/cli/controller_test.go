package cli

import (
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/report/reportapi"
)

// TestControllerReportFlags: --policy-reports and --report-api override
// the config file's policyReports, and --report-api alone is refused with
// the fix.
func TestControllerReportFlags(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		file    config.PolicyReportsConfig
		want    config.PolicyReportsConfig
		wantErr string
	}{
		{name: "off by default", want: config.PolicyReportsConfig{}},
		{name: "flag turns it on", args: []string{"--policy-reports"}, want: config.PolicyReportsConfig{Enabled: true}},
		{name: "flag turns the file's off", args: []string{"--policy-reports=false"}, file: config.PolicyReportsConfig{Enabled: true}, want: config.PolicyReportsConfig{}},
		{name: "file alone", file: config.PolicyReportsConfig{Enabled: true, API: reportapi.OpenReports}, want: config.PolicyReportsConfig{Enabled: true, API: reportapi.OpenReports}},
		{name: "API flag over the file's", args: []string{"--policy-reports", "--report-api", string(reportapi.OpenReports)},
			file: config.PolicyReportsConfig{API: reportapi.WGPolicy}, want: config.PolicyReportsConfig{Enabled: true, API: reportapi.OpenReports}},
		{name: "API without reports", args: []string{"--report-api", string(reportapi.OpenReports)}, wantErr: "add --policy-reports"},
		{name: "unknown API", args: []string{"--policy-reports", "--report-api", "wgpolicyk8s.io/v1beta1"}, wantErr: "openreports.io/v1alpha1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := newController()
			if err := cmd.ParseFlags(c.args); err != nil {
				t.Fatal(err)
			}
			// The command binds its flags to options of its own: read
			// them back from the parsed flags.
			o := &controllerOptions{}
			o.policyReports, _ = cmd.Flags().GetBool("policy-reports")
			o.reportAPI, _ = cmd.Flags().GetString("report-api")
			cfg := config.Default()
			cfg.PolicyReports = c.file
			err := o.reports(cmd, &cfg)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.PolicyReports != c.want {
				t.Errorf("policyReports = %+v, want %+v", cfg.PolicyReports, c.want)
			}
		})
	}
}
