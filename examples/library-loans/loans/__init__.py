"""Library loans: members borrow books over HTTP (FastAPI), each within a quota, and an hourly
timer marks the loans past their due date overdue; every change and its event are written in
one Cosmos DB transactional batch."""
