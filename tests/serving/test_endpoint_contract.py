"""An endpoint names its contract and prompt format; the console shows them; the client gets them."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from serving.models import ModelEndpoint
from serving.services import FROZEN_WHEN_USED
from tests.factories import ModelEndpointFactory

pytestmark = pytest.mark.django_db


def test_the_default_is_the_projects_own_contract_with_raw_prompts():
    endpoint = ModelEndpointFactory.create()
    spec = endpoint.spec()
    assert (spec.contract, spec.prompt_format) == ("arena", "raw")


def test_the_spec_carries_contract_and_prompt_format():
    endpoint = ModelEndpointFactory.create(contract="vllm", prompt_format="chatml")
    endpoint.full_clean()
    spec = endpoint.spec()
    assert (spec.contract, spec.prompt_format, spec.protocol) == ("vllm", "chatml", "grpc")


@pytest.mark.parametrize("contract", ["vllm", "trtllm"])
def test_the_gpu_contracts_are_refused_over_http(contract):
    endpoint = ModelEndpointFactory.build(contract=contract, protocol="http")
    with pytest.raises(ValidationError, match="need gRPC"):
        endpoint.full_clean(exclude=["organization"])


def test_left_out_fields_fall_back_to_the_defaults():
    endpoint = ModelEndpointFactory.build(contract="", prompt_format="")
    endpoint.full_clean(exclude=["organization"])
    assert (endpoint.contract, endpoint.prompt_format) == ("arena", "raw")


def test_a_used_endpoint_keeps_its_prompt_format():
    # The same weights under another chat template answer differently: a new competitor, not an edit.
    assert "prompt_format" in FROZEN_WHEN_USED and "contract" not in FROZEN_WHEN_USED


def test_the_console_lists_and_edits_the_contract(acme, alice_client):
    endpoint = acme.left.endpoint
    listing = alice_client.get("/admin/serving/modelendpoint/").content.decode()
    assert "Contract" in listing and "Prompt format" in listing
    form = alice_client.get(f"/admin/serving/modelendpoint/{endpoint.pk}/change/").content.decode()
    assert 'name="contract"' in form and 'name="prompt_format"' in form
    response = alice_client.post(
        f"/admin/serving/modelendpoint/{endpoint.pk}/change/",
        {
            "organization": acme.organization.pk,
            "name": endpoint.name,
            "url": endpoint.url,
            "protocol": "grpc",
            "model_name": "vllm-standin",
            "model_version": "",
            "timeout_s": "5",
            "contract": "vllm",
            "prompt_format": "chatml",
        },
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    endpoint.refresh_from_db()
    assert (endpoint.contract, endpoint.prompt_format) == (ModelEndpoint.Contract.VLLM, "chatml")
