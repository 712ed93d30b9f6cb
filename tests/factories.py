"""factory_boy factories for the platform's rows. Endpoints default to the session's real Triton.

Each is a ``DjangoModelFactory[Model]``: ``XFactory.create(...)`` is then typed as the model (calling
``XFactory(...)`` does the same at run time but is typed as the factory)."""

from __future__ import annotations

from typing import Any

import factory
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User

from battles.models import Campaign, Competitor, Prompt
from battles.prompting import prompt_hash
from raters.models import Membership, Organization, RaterPool, Role
from serving.models import ModelEndpoint

PASSWORD = "correct-horse-battery"


class OrganizationFactory(factory.django.DjangoModelFactory[Organization]):
    class Meta:
        model = Organization

    name = factory.Sequence(lambda n: f"Org {n}")
    slug = factory.Sequence(lambda n: f"org-{n}")


class UserFactory(factory.django.DjangoModelFactory[User]):
    class Meta:
        model = get_user_model()
        skip_postgeneration_save = True

    email = factory.Sequence(lambda n: f"user{n}@example.test")
    username = factory.LazyAttribute(lambda o: o.email)
    # Hashed when the row is built (``password="..."`` is hashed too), so creating a user is one INSERT,
    # not an INSERT and an UPDATE.
    password = factory.django.Password(PASSWORD)

    @factory.post_generation
    def verified_email(obj: User, create: bool, extracted: object, **kwargs: Any) -> None:
        if create:
            from allauth.account.models import EmailAddress

            EmailAddress.objects.create(user=obj, email=obj.email, primary=True, verified=True)


class MembershipFactory(factory.django.DjangoModelFactory[Membership]):
    class Meta:
        model = Membership

    user = factory.SubFactory(UserFactory)
    organization = factory.SubFactory(OrganizationFactory)
    role = Role.RATER


class RaterPoolFactory(factory.django.DjangoModelFactory[RaterPool]):
    class Meta:
        model = RaterPool

    organization = factory.SubFactory(OrganizationFactory)
    name = factory.Sequence(lambda n: f"Pool {n}")


class ModelEndpointFactory(factory.django.DjangoModelFactory[ModelEndpoint]):
    class Meta:
        model = ModelEndpoint

    organization = factory.SubFactory(OrganizationFactory)
    name = factory.Sequence(lambda n: f"model-{n}")
    url = "127.0.0.1:1"
    protocol = ModelEndpoint.Protocol.GRPC
    model_name = "zen-bigram"
    timeout_s = 20.0


class CampaignFactory(factory.django.DjangoModelFactory[Campaign]):
    class Meta:
        model = Campaign

    organization = factory.SubFactory(OrganizationFactory)
    name = factory.Sequence(lambda n: f"Campaign {n}")
    slug = factory.Sequence(lambda n: f"campaign-{n}")
    status = Campaign.Status.OPEN
    max_tokens = 48
    # No battles generated ahead unless a test asks for a buffer (tests/battles/test_buffer.py): each
    # battle is then prepared for its rater, which is what most tests look at.
    buffer_size = 0
    min_decision_ms = 0


class CompetitorFactory(factory.django.DjangoModelFactory[Competitor]):
    class Meta:
        model = Competitor

    campaign = factory.SubFactory(CampaignFactory)
    organization = factory.SelfAttribute("campaign.organization")
    endpoint = factory.SubFactory(ModelEndpointFactory, organization=factory.SelfAttribute("..organization"))
    version_label = "v1"


class PromptFactory(factory.django.DjangoModelFactory[Prompt]):
    class Meta:
        model = Prompt

    campaign = factory.SubFactory(CampaignFactory)
    organization = factory.SelfAttribute("campaign.organization")
    text = factory.Sequence(lambda n: f"Explain idea number {n} in simple words.")
    text_hash = factory.LazyAttribute(lambda o: prompt_hash(o.text))
    category = "knowledge"
    language = "en"
