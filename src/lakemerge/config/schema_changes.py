"""What a table does when its changes' columns differ from its own: ``[tables.NAME.schema_changes]``
(or, for every table of a source, ``[sources.NAME.defaults.schema_changes]``)."""

from __future__ import annotations

from typing import Literal

from lakemerge.config.base import Model

NewColumn = Literal["evolve", "ignore", "fail"]
DroppedColumn = Literal["keep", "null", "drop"]
WidenedType = Literal["widen", "enable", "fail"]
IncompatibleType = Literal["fail", "quarantine"]


class SchemaChanges(Model):
    """A table's policy for each kind of schema change (docs/semantics.md §7 Schema drift). Every
    change a batch makes to the table's columns is recorded in its commit, and ``lakemerge
    history`` shows it.

    Attributes:
        new_column: a column the changes have and the table lacks: ``evolve`` (the default) adds
            it to the table, ``ignore`` leaves it out, ``fail`` stops the batch naming the column
            and the first record holding a value in it.
        dropped_column: a column the table has and a batch's changes lack (a column dropped in the
            database, as Debezium's events show it): ``keep`` (the default) keeps it, with its
            stored values where a change updates a row; ``null`` keeps it, null in every row a
            change writes from then on; ``drop`` removes it from the table (not a key, sequence or
            partition column; not in ``log`` mode).
        widened_type: a column whose type in the changes is wider than the table's (``int`` into
            ``smallint``, ``bigint`` into ``int``, ``double`` into ``float``, a decimal of more
            digits): ``widen`` (the default) widens the table's column where the table has Delta's
            type widening on (``delta.enableTypeWidening``) and stops the batch where it is off;
            ``enable`` turns it on first (readers of the table then need a Delta reader with type
            widening: delta-rs cannot read such a table); ``fail`` stops the batch.
        incompatible_type: a column whose type in the changes the table's cannot hold (text where
            it has numbers, a narrower decimal scale, ...): ``fail`` (the default) stops the batch
            naming the column, both types and the first record; ``quarantine`` applies the records
            whose values convert to the table's type and quarantines the others (docs/semantics.md
            §9), within the table's bad-row threshold.
    """

    new_column: NewColumn = "evolve"
    dropped_column: DroppedColumn = "keep"
    widened_type: WidenedType = "widen"
    incompatible_type: IncompatibleType = "fail"
