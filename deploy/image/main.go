// Command image builds agentexec's container image without a daemon: it
// compiles agentexec and agentexec-sandbox as static binaries
// (CGO_ENABLED=0, -trimpath) and writes an image of one layer (the
// binaries, passwd and group entries for the non-root user, the image's
// configuration) on an empty base, as an OCI image layout directory and,
// optionally, as a tarball that `docker load`, `podman load` and
// `skopeo copy oci-archive:` accept.
//
// It is a module of its own so that the main module's dependencies stay the
// approved set; it needs nothing beyond the standard library, which is why
// it writes the OCI layout itself rather than through go-containerregistry:
// an empty base needs no registry client, and a layout is three JSON
// documents and a tarball. The release image, with a Debian base holding
// bash and git for the agent's commands, is built from the Dockerfile at the
// repository's root; this program's image is the same layer on an empty
// base, checked in CI, where there is neither a daemon nor a registry.
//
//	cd deploy/image && go run . -o /tmp/agentexec-image -tar /tmp/agentexec.tar
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
)

func main() {
	var o Options
	flag.StringVar(&o.Out, "o", "", "directory to write the OCI image layout to (created; must not exist or be empty)")
	flag.StringVar(&o.Tarball, "tar", "", "also write the image as a tarball (OCI layout plus Docker's manifest.json) to this file")
	flag.StringVar(&o.Arch, "arch", runtime.GOARCH, "GOARCH of the image")
	flag.StringVar(&o.Tag, "tag", "agentexec:dev", "reference name recorded in the layout and the tarball")
	flag.StringVar(&o.Version, "version", "dev", "org.opencontainers.image.version label")
	flag.Parse()
	if o.Out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: go run . -o DIR [-tar FILE] [-arch GOARCH] [-tag NAME:TAG]")
		os.Exit(2)
	}
	img, err := Build(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %s (manifest %s, layer %s, %d bytes)\n", o.Out, img.Manifest, img.Layer, img.LayerSize)
	if o.Tarball != "" {
		fmt.Printf("wrote %s\n", o.Tarball)
	}
}
