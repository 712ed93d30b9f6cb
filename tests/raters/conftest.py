"""Admin fixtures: dana manages two tenants, Acme and Globex; dave is a manager (not an owner) of Acme."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from raters.models import Role
from tests.conftest import Tenant, login
from tests.factories import MembershipFactory, UserFactory


@pytest.fixture
def dana(acme: Tenant, globex: Tenant) -> User:
    user = UserFactory.create(email="dana@consultancy.test")
    MembershipFactory.create(user=user, organization=acme.organization, role=Role.MANAGER)
    MembershipFactory.create(user=user, organization=globex.organization, role=Role.MANAGER)
    return user


@pytest.fixture
def dana_client(dana: User) -> Client:
    return login(dana)


@pytest.fixture
def dave(acme: Tenant) -> User:
    user = UserFactory.create(email="dave@acme.test")
    MembershipFactory.create(user=user, organization=acme.organization, role=Role.MANAGER)
    return user


@pytest.fixture
def dave_client(dave: User) -> Client:
    return login(dave)
