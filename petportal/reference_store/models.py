"""The reference store's data: one table of animals."""

from typing import TYPE_CHECKING

from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import BigInteger, Integer, String
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from petportal.reference_store.openapi import NAME_MAX_LENGTH


class Base(DeclarativeBase):
    """What the store's table is declared from."""


db = SQLAlchemy(model_class=Base)
# Flask-SQLAlchemy makes `db.Model` from `Base` at run time, where a type checker cannot follow it.
if TYPE_CHECKING:
    Model = Base
else:
    Model = db.Model


class Pet(Model):
    """An animal in the store."""

    __tablename__ = "pets"

    # SQLite only autoincrements a column declared INTEGER; it is 64-bit there anyway.
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    name: Mapped[str] = mapped_column(String(NAME_MAX_LENGTH))
    category_id: Mapped[int] = mapped_column(BigInteger)
    status: Mapped[str | None] = mapped_column(String(16))

    def to_json(self) -> dict[str, int | str]:
        """The animal as a `Pet` record; a missing status is left out, never null."""
        record: dict[str, int | str] = {"id": self.id, "name": self.name, "categoryId": self.category_id}
        if self.status is not None:
            record["status"] = self.status
        return record
