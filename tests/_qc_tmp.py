import time, pytest
from django.db import connection

@pytest.fixture(autouse=True)
def _qcount(request, django_db_blocker):
    n=[0]
    def wrapper(execute, sql, params, many, context):
        n[0]+=1
        return execute(sql, params, many, context)
    t=time.perf_counter(); c0=time.process_time()
    with connection.execute_wrapper(wrapper):
        yield
    print(f"\nQC {request.node.nodeid} queries={n[0]} wall={time.perf_counter()-t:.2f} cpu={time.process_time()-c0:.2f}")
