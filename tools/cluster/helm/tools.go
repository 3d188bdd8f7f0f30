//go:build tools

package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
