package replication

import "testing"

func TestDecodeBatchResponse_badEntityFailsAlone(t *testing.T) {
	res, err := DecodeBatchResponse([]byte(`{"responseList":[{"statusCode":404},{"statusCode":409,"responseEntity":{"port":{"$":"abc"}}},{"statusCode":200}]}`))
	if err != nil {
		t.Fatalf("one unreadable entity failed the batch: %v", err)
	}
	if len(res.Items) != 3 || res.Items[0].StatusCode != 404 || res.Items[1].Instance != nil || res.Items[2].StatusCode != 200 {
		t.Fatalf("items %+v", res.Items)
	}
}
