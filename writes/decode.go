package writes

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// ErrUnsupportedContentType is matched by the error reported for a write
// response the transport does not decode (CBOR, or anything else than JSON
// and Kubernetes protobuf): that write is not recorded, and its body is
// passed through unread.
var ErrUnsupportedContentType = errors.New("writes: unsupported response content type")

// protobufMagic starts every Kubernetes protobuf body.
const protobufMagic = "k8s\x00"

// decoded is the part of a write response the transport needs.
type decoded struct {
	meta   metav1.ObjectMeta
	status bool   // the body is a Status, not an object
	uid    string // a Status's details.uid
	name   string // a Status's details.name
}

// decodable returns the media type of a Content-Type the transport
// decodes (JSON or Kubernetes protobuf), and an error matching
// ErrUnsupportedContentType for any other.
func decodable(contentType string) (string, error) {
	switch contentType {
	case runtime.ContentTypeJSON, runtime.ContentTypeProtobuf: // what API servers send: no parsing
		return contentType, nil
	}
	mediaType, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return "", fmt.Errorf("%w: %q", ErrUnsupportedContentType, contentType)
	}
	switch mediaType {
	case runtime.ContentTypeJSON, runtime.ContentTypeProtobuf:
		return mediaType, nil
	}
	return "", fmt.Errorf("%w: %q", ErrUnsupportedContentType, mediaType)
}

// decodeMeta decodes only the metadata of a response body (JSON or
// Kubernetes protobuf), or a Status's details.
func decodeMeta(contentType string, body []byte) (decoded, error) {
	mediaType, err := decodable(contentType)
	if err != nil {
		return decoded{}, err
	}
	if mediaType == runtime.ContentTypeProtobuf {
		return decodeProtobuf(body)
	}
	return decodeJSON(body)
}

// jsonObject holds the fields read from a JSON body; the rest (spec,
// status, managedFields, ...) is skipped.
type jsonObject struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name            string            `json:"name"`
		Namespace       string            `json:"namespace"`
		UID             string            `json:"uid"`
		ResourceVersion string            `json:"resourceVersion"`
		Labels          map[string]string `json:"labels"`
	} `json:"metadata"`
	Details *struct {
		Name string `json:"name"`
		UID  string `json:"uid"`
	} `json:"details"`
}

func decodeJSON(body []byte) (decoded, error) {
	var o jsonObject
	if err := json.Unmarshal(body, &o); err != nil {
		return decoded{}, fmt.Errorf("writes: decoding a JSON write response: %w", err)
	}
	d := decoded{status: o.Kind == "Status"}
	if d.status {
		if o.Details != nil {
			d.name, d.uid = o.Details.Name, o.Details.UID
		}
		return d, nil
	}
	m := o.Metadata
	d.meta = metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: types.UID(m.UID), ResourceVersion: m.ResourceVersion, Labels: m.Labels}
	return d, nil
}

func decodeProtobuf(body []byte) (decoded, error) {
	if !bytes.HasPrefix(body, []byte(protobufMagic)) {
		return decoded{}, errors.New("writes: protobuf write response without the Kubernetes magic prefix")
	}
	var u runtime.Unknown
	if err := u.Unmarshal(body[len(protobufMagic):]); err != nil {
		return decoded{}, fmt.Errorf("writes: decoding a protobuf write response: %w", err)
	}
	if u.Kind == "Status" {
		var s metav1.Status
		if err := s.Unmarshal(u.Raw); err != nil {
			return decoded{}, fmt.Errorf("writes: decoding a protobuf Status: %w", err)
		}
		d := decoded{status: true}
		if s.Details != nil {
			d.name, d.uid = s.Details.Name, string(s.Details.UID)
		}
		return d, nil
	}
	// Every Kubernetes object carries its ObjectMeta in field 1, as
	// PartialObjectMetadata does; the other fields are skipped.
	var p metav1.PartialObjectMetadata
	if err := p.Unmarshal(u.Raw); err != nil {
		return decoded{}, fmt.Errorf("writes: decoding a protobuf object's metadata: %w", err)
	}
	return decoded{meta: p.ObjectMeta}, nil
}

// sentResourceVersion returns the resource version an update or patch
// carries as its precondition (metadata.resourceVersion, or a JSON patch's
// test of /metadata/resourceVersion), "" if none or if the body is not one
// the transport decodes.
func sentResourceVersion(contentType string, body []byte) string {
	mediaType, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return ""
	}
	switch types.PatchType(mediaType) {
	case types.MergePatchType, types.StrategicMergePatchType, types.ApplyYAMLPatchType:
		mediaType = runtime.ContentTypeJSON // JSON, or YAML that is not decoded
	case types.JSONPatchType:
		var ops []struct {
			Op, Path string
			Value    any
		}
		if json.Unmarshal(body, &ops) != nil {
			return ""
		}
		for _, op := range ops {
			if s, ok := op.Value.(string); ok && op.Op == "test" && op.Path == "/metadata/resourceVersion" {
				return s
			}
		}
		return ""
	}
	d, err := decodeMeta(mediaType, body)
	if err != nil || d.status {
		return ""
	}
	return d.meta.ResourceVersion
}
