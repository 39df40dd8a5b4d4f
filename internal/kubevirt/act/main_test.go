package act_test

import (
	"testing"

	"github.com/tether-dev/tether/internal/testing/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Tenants: []string{"guest"}})
}
