// Command hatchery-vsphere runs the CDS vSphere hatchery.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "hatchery-vsphere: not implemented yet")
	os.Exit(2)
}
