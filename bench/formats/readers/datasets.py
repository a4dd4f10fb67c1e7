"""Data sets that the ``vega_datasets`` wheel ships (``vega_datasets/_data/``).

* ``airports-csv``: ``airports.csv``, the FAA's US airports: a header row
  ``iata,name,city,state,country,latitude,longitude``, then one airport a row (a value with a
  comma is double-quoted). Rows are named by their IATA/FAA code.
* ``cars-json``: ``cars.json``, the UCI Auto MPG cars: one JSON array, pretty-printed, one
  object a car (``"Name"``, ``"Miles_per_Gallon"``, ``"Cylinders"``, ..., ``"Origin"``), its
  keys one a line. Cars are named by their ``Name``.
"""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path

from model import Field, Format, Record


def _data(name: str) -> list[Path]:
    spec = importlib.util.find_spec("vega_datasets")
    if spec is None or not spec.submodule_search_locations:
        return []
    path = Path(list(spec.submodule_search_locations)[0]) / "_data" / name
    return [path] if path.is_file() else []


_COLUMNS = ("name", "city", "state", "country", "latitude", "longitude")


def parse_airports(text: str) -> list[Record]:
    records = []
    pos = 0
    for n, line in enumerate(text.splitlines(keepends=True)):
        start, pos = pos, pos + len(line)
        row = next(csv.reader([line]), [])
        if n == 0 or len(row) != 7:
            continue
        records.append(Record(row[0], dict(zip(_COLUMNS, row[1:], strict=True)), start, pos))
    return records


def parse_cars(text: str) -> list[Record]:
    records = []
    pos = 0
    start = None
    for line in text.splitlines(keepends=True):
        begin, pos = pos, pos + len(line)
        body = line.strip()
        if body == "{":
            start = begin
        elif body in ("}", "},") and start is not None:
            car = json.loads(text[start:pos].rstrip().rstrip(","))
            records.append(Record(str(car.get("Name", "")), {k: "" if v is None else str(v) for k, v in car.items()},
                                  start, pos))
            start = None
    return records


def _first_line(text: str) -> int:
    return text.find("\n") + 1


FORMATS = [
    Format(name="airports-csv", split="dev", source="PyPI: vega_datasets (_data/airports.csv)",
           text="the airports CSV file", thing="airport", things="airports",
           fields=(Field("name", "the name"), Field("city", "the city"), Field("state", "the state", count=True),
                   Field("country", "the country", count=True), Field("latitude", "the latitude"),
                   Field("longitude", "the longitude")),
           files=lambda: _data("airports.csv"), parse=parse_airports, head=_first_line),
    Format(name="cars-json", split="heldout", source="PyPI: vega_datasets (_data/cars.json)",
           text="the cars JSON file", thing="car", things="cars",
           fields=(Field("Miles_per_Gallon", "the miles per gallon"), Field("Cylinders", "the number of cylinders",
                                                                            count=True),
                   Field("Displacement", "the displacement"), Field("Horsepower", "the horsepower"),
                   Field("Weight_in_lbs", "the weight in lbs"), Field("Acceleration", "the acceleration"),
                   Field("Year", "the year", count=True), Field("Origin", "the origin", count=True)),
           files=lambda: _data("cars.json"), parse=parse_cars),
]
